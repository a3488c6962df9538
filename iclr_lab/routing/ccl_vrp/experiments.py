"""The CCL chapter's experiments: ``reproduce()``, its claims and the numbers its prose quotes.

The evidence comes in two parts.

* **Offline**, shipped with the package and the same for every seed of the chapter: the
  per-instance costs of the fixed test set (100 instances of each of the 24 variants, 20 customers;
  :func:`iclr_lab.routing.evaluate.load_costs`): PyVRP's reference cost, nearest neighbour's, and
  those of the three training seeds of CCL and of the static decoder, with the independent checker's
  verdicts; and the learning curves recorded by the training script.
* **Live**, drawn by the chapter's seed: a sample of the in-distribution test instances is decoded
  again with the shipped seed-0 policies and nearest neighbour, a few instances are solved again
  with PyVRP, and every live cost must equal the shipped one; the visit-state probe and the gate
  traces run on the same sample.

Gaps are ``100 (cost - PyVRP) / PyVRP`` per instance, averaged over instances and then over variants.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from iclr_lab.core.progress import progress
from iclr_lab.core.report import Claim, Report, timed
from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.stats import loglog_slope
from iclr_lab.core.validation import check_int, check_seed
from iclr_lab.routing.ccl_vrp.data import (
    LABELS,
    MODELS,
    PICTURE_VARIANTS,
    PYVRP_SETTINGS,
    TRAIN_SEEDS,
    gate_trace,
    policy,
    route_stops,
    test_instance,
)
from iclr_lab.routing.ccl_vrp.explore import charts
from iclr_lab.routing.checker import check_solution
from iclr_lab.routing.instances import ID_VARIANTS, MB_VARIANTS, VRPBatch, concat
from iclr_lab.routing.model import solve
from iclr_lab.routing.probe import visit_state_probe
from iclr_lab.routing.solvers import nearest_neighbour, pyvrp_solve

if TYPE_CHECKING:
    from iclr_lab.routing.model import Rollout

__all__ = ["instance_gaps", "live_sample", "numbers", "reproduce"]

# thresholds, fixed before any run (see each claim's statement for where they come from)
GAP_BAR = 8.0          # percent, the spec's acceptance bar A2
NN_RATIO = 0.5         # CCL's gap at most half of nearest neighbour's (A2)
STATIC_RATIO = 0.8     # CCL's gap at most 0.8x the static decoder's (the paper shows about 0.5x)
PROBE_GAIN = 0.2       # R^2 gain of the visit-state probe (A5)
NONINFERIOR_MARGIN = 0.5  # percentage points: CCL's gap at most the static decoder's + 0.5 (A3)
#: the control of the claims that any trained policy passes
STATIC_CONTROL = "the static decoder (the same encoder, training and budget, no chain of context)"
#: where the paper makes its claim, and where this chapter runs it
REGIME = ("paper: 50 and 100 customers, 300 epochs of 100,000 instances, MTPOMO (one variant per "
          "batch) as the baseline; here: 20 customers, 1,300 steps of 32 mixed-variant instances on "
          "one CPU thread, RouteFinder's static decoder (same batches) as the baseline; 3 training "
          "seeds, the shipped policies (the seed blocks of the stability table do not retrain)")
SEED_SPREAD = 1.0      # percentage points between training seeds (the acceptance)
LIVE_RTOL = 1e-4       # a live cost "matches" the shipped one within this (the CSV keeps 6 decimals)
# Greedy decoding takes argmaxes in float32: on another CPU a near-tie between two logits can flip
# and change one tour. The live check tolerates a rare flip, but not a wrong CSV: per solver, at
# least LIVE_SHARE of the live costs match the shipped ones, and their mean relative difference is
# at most LIVE_MEAN (a flipped tour moves one cost by a few percent, i.e. about 3e-4 of a 128-row
# mean; a stale or wrong column mismatches nearly every row).
LIVE_SHARE = 95.0      # percent of the live costs of each solver
LIVE_MEAN = 1e-3


@dataclass(frozen=True)
class _Sizes:
    live_per_variant: int         # test instances re-decoded live per in-distribution variant
    pyvrp_live: int               # variants of the picture's instance re-solved live with PyVRP
    bootstrap: int                # draws of the per-variant confidence intervals
    flops_nodes: tuple[int, ...]  # customer counts of the FLOP count


SIZES = {
    "smoke": _Sizes(live_per_variant=1, pyvrp_live=2, bootstrap=200, flops_nodes=(10, 20)),
    "book": _Sizes(live_per_variant=8, pyvrp_live=len(PICTURE_VARIANTS), bootstrap=2000,
                   flops_nodes=(10, 20, 50, 100)),
    "paper": _Sizes(live_per_variant=32, pyvrp_live=len(PICTURE_VARIANTS), bootstrap=10_000,
                    flops_nodes=(10, 20, 50, 100, 200)),
}


# -- the shipped data -----------------------------------------------------------------------------

def instance_gaps(costs: pd.DataFrame) -> pd.DataFrame:
    """The shipped costs in long form: one row per variant x instance x solver x training seed with
    ``cost``, ``gap`` (percent above PyVRP) and ``ok`` (the checker's verdict, physical load rule).
    Nearest neighbour has no training seed; it appears once, under seed 0."""
    frames = []
    solvers = [("nn", 0)] + [(m, s) for m in MODELS for s in TRAIN_SEEDS]
    for model, seed in solvers:
        col = "nn" if model == "nn" else f"{model}_{seed}"
        frames.append(pd.DataFrame({
            "variant": costs["variant"], "ood": costs["ood"].astype(bool), "instance": costs["instance"],
            "model": LABELS[model], "seed": seed, "cost": costs[col],
            "gap": 100 * (costs[col] - costs["pyvrp"]) / costs["pyvrp"],
            "ok": costs[f"ok_{col}"].astype(bool), "ok_env": costs[f"okenv_{col}"].astype(bool)}))
    return pd.concat(frames, ignore_index=True)


def _gap_table(long: pd.DataFrame) -> pd.DataFrame:
    order = {v: i for i, v in enumerate(ID_VARIANTS + MB_VARIANTS)}
    out = long.groupby(["variant", "ood", "model", "seed"], as_index=False).agg(
        gap=("gap", "mean"), passed=("ok", "mean"), passed_env=("ok_env", "mean"),
        instances=("gap", "size"))
    out[["passed", "passed_env"]] *= 100
    return out.sort_values(["variant", "model", "seed"], key=lambda c: c.map(order) if c.name == "variant"
                           else c).reset_index(drop=True)


def _summary(gaps: pd.DataFrame) -> pd.DataFrame:
    """Per solver and training seed: mean gap over the in-distribution variants and over the
    mixed-backhaul ones, and the smallest pass rate over the variants of each group."""
    rows = []
    for (model, seed), g in gaps.groupby(["model", "seed"], sort=False):
        ind, ood = g[~g.ood], g[g.ood]
        rows.append({"model": model, "seed": seed, "gap_id": ind.gap.mean(), "gap_ood": ood.gap.mean(),
                     "passed_id": ind.passed.min(), "passed_ood": ood.passed.mean(),
                     "passed_ood_env": ood.passed_env.mean()})
    return pd.DataFrame(rows)


def _difference(long: pd.DataFrame, draws: int, rng: np.random.Generator) -> pd.DataFrame:
    """Per variant: the mean of CCL's gap minus the static decoder's, paired by training seed and
    instance, with a 95% interval from a two-stage bootstrap (training seeds with replacement, then
    instances with replacement)."""
    rows = []
    wide = long[long.model.isin([LABELS["ccl"], LABELS["static"]])].pivot_table(
        index=["variant", "ood", "instance"], columns=["model", "seed"], values="gap")
    for variant in ID_VARIANTS + MB_VARIANTS:
        if variant not in wide.index.get_level_values(0):
            continue
        w = wide.xs(variant, level="variant")
        ood = bool(w.index.get_level_values("ood")[0])
        d = np.stack([(w[(LABELS["ccl"], s)] - w[(LABELS["static"], s)]).to_numpy() for s in TRAIN_SEEDS])
        n_seed, n_inst = d.shape
        s_idx = rng.integers(0, n_seed, (draws, n_seed))
        i_idx = rng.integers(0, n_inst, (draws, n_inst))
        boot = d[s_idx[:, :, None], i_idx[:, None, :]].mean(axis=(1, 2))
        lo, hi = np.quantile(boot, [0.025, 0.975])
        rows.append({"variant": variant, "ood": ood, "difference": float(d.mean()), "lo": float(lo),
                     "hi": float(hi)})
    return pd.DataFrame(rows)


# -- the live re-run ------------------------------------------------------------------------------

def live_sample(instances: Sequence[int], per_variant: int, seed: int) -> dict[str, list[int]]:
    """The test instances the chapter re-runs at ``seed``: ``per_variant`` of ``instances`` for each
    in-distribution variant, drawn without replacement, each variant its own draw.
    ``per_variant`` is in ``[1, len(instances)]``, ``seed`` in ``[0, 2**32 - 1]``."""
    per_variant = check_int("per_variant", per_variant, 1)
    seed = check_seed(seed)
    pool = np.array(sorted(int(i) for i in instances))
    if per_variant > len(pool):
        raise ValueError(f"per_variant must be at most {len(pool)} (the test instances), got {per_variant}")
    rng = np.random.default_rng(seed)
    return {v: sorted(int(i) for i in rng.choice(pool, per_variant, replace=False)) for v in ID_VARIANTS}


def _live_batch(sample: dict[str, list[int]]) -> tuple[VRPBatch, list[tuple[str, int]]]:
    """The sample as one batch, ordered so that its first half holds the first half of every
    variant's instances (the probe fits on the first half and scores on the second)."""
    keys = []
    for part in (0, 1):
        for v, idx in sample.items():
            half = (len(idx) + 1) // 2
            keys += [(v, i) for i in (idx[:half] if part == 0 else idx[half:])]
    return concat([test_instance(v, i) for v, i in keys]), keys


def _lookup(costs: pd.DataFrame, column: str) -> dict[tuple[str, int], float]:
    return {(str(v), int(i)): float(c) for v, i, c in zip(costs["variant"], costs["instance"], costs[column],
                                                          strict=True)}


def _live(batch: VRPBatch, keys: list[tuple[str, int]],
          costs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Rollout]]:
    """The live re-decoding of the sample, checked against the shipped costs; also each seed-0
    policy's recorded identity-symmetry rollout of the sample, which the probe and the drift
    read (the same greedy decoding, so it is not run a second and a third time)."""
    found: dict[str, tuple[list[float], list[list[list[int]]]]] = {}
    recorded: dict[str, Rollout] = {}
    for model in MODELS:
        sol = solve(policy(model, 0), batch, augment=8, record=True)
        found[f"{model}_0"] = (sol.cost.tolist(), sol.routes)
        assert sol.identity is not None
        recorded[model] = sol.identity
    nn_cost, nn_routes = nearest_neighbour(batch)
    found["nn"] = (nn_cost.tolist(), nn_routes)
    rows = []
    for col, (_, routes) in found.items():
        shipped = _lookup(costs, col)
        for b, (variant, i) in enumerate(keys):
            check = check_solution(batch[b], routes[b])
            ref = shipped[(variant, i)]
            rows.append({"variant": variant, "instance": i, "solver": col, "live": check.cost,
                         "shipped": ref, "rel_diff": abs(check.cost - ref) / ref, "ok": check.feasible})
    return pd.DataFrame(rows), recorded


def _pyvrp_live(instance: int, variants: Sequence[str],
                costs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """PyVRP solved live on one test instance under several variants: the comparison rows and the
    routes (one row per stop, depot at both ends; open routes keep their free return)."""
    shipped = _lookup(costs, "pyvrp")
    rows, stops = [], []
    for variant in progress(variants, desc="PyVRP"):
        inst = test_instance(variant, instance)
        cost, routes = pyvrp_solve(inst, **PYVRP_SETTINGS)
        ref = shipped[(variant, instance)]
        rows.append({"variant": variant, "instance": instance, "solver": "pyvrp", "live": cost,
                     "shipped": ref, "rel_diff": abs(cost - ref) / ref, "ok": True})
        stops.append(route_stops(inst, routes).assign(variant=variant, cost=cost))
    return pd.DataFrame(rows), pd.concat(stops, ignore_index=True)


def _drift(r: Rollout) -> float:
    """How far the chain moves the node embeddings along the recorded rollout ``r``:
    ``|H_j - H_0| / |H_0|`` per node, averaged over the nodes, the instances and the steps that
    the probe reads."""
    assert r.embeddings is not None
    emb = r.embeddings
    return float(((emb - emb[:1]).norm(dim=-1) / emb[:1].norm(dim=-1)).mean())


def _probe(batch: VRPBatch, recorded: dict[str, Rollout]) -> pd.DataFrame:
    """The visit-state probe on the live sample; ``recorded`` holds the seed-0 policies' greedy
    rollouts of it at ``P = 1`` (from :func:`_live`), the probe decodes ``P = 0`` itself."""
    rows = []
    for label, model, p in ((LABELS["ccl"], "ccl", 1.0),
                            (f"{LABELS['ccl']}, no re-embedding (P = 0)", "ccl", 0.0),
                            (LABELS["static"], "static", 1.0)):
        pol = policy(model, 0)
        r = recorded[model] if p == 1.0 else None
        res = visit_state_probe(pol, batch, p_reembed=p, recorded=r)
        # without re-embedding (static decoder, or P = 0) the embeddings never move
        drift = _drift(recorded[model]) if pol.config.decoder == "ccl" and p > 0 else 0.0
        rows.append({"policy": label, "r2_step": res.chain, "r2_encoder": res.static, "gain": res.gain,
                     "drift": drift})
    return pd.DataFrame(rows)


def _flops(nodes: Sequence[int]) -> pd.DataFrame:
    """FLOPs of one TSNR step, shared and per trajectory, for ``nodes`` customers: the shipped
    counts of :func:`~iclr_lab.routing.evaluate.count_flops` (the tests count a sample again)."""
    from iclr_lab.routing.evaluate import load_flops

    return load_flops(nodes)


def _train() -> pd.DataFrame:
    """Each shipped run's training record: steps, batch size and the instances it saw."""
    import json

    from iclr_lab.routing.train import shipped_path

    rows = []
    for model in MODELS:
        for seed in TRAIN_SEEDS:
            tc = json.loads(shipped_path(model, seed).with_suffix(".json").read_text())["train"]
            rows.append({"model": LABELS[model], "seed": seed, "steps": tc["steps"], "batch": tc["batch"],
                         "instances": tc["steps"] * tc["batch"]})
    return pd.DataFrame(rows)


def _curves() -> pd.DataFrame:
    from iclr_lab.routing.evaluate import learning_curves

    c = learning_curves()
    return c.assign(model=c["model"].map(LABELS))[["model", "seed", "step", "cost", "cpu_s"]]


# -- reproduce ------------------------------------------------------------------------------------

def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Score the shipped test costs and re-run a sample of them live.

    The offline tables and the claims read from them do not depend on ``seed``; the seed draws the
    live sample (``live_per_variant`` instances of each in-distribution variant, and the instance
    of the picture that PyVRP solves live), on which the probe and the gate traces run, and the
    bootstrap draws of the confidence intervals.
    """
    from iclr_lab.routing.evaluate import load_costs

    size = pick(SIZES, scale)
    seed = check_int("seed", seed, 0, 2**31)
    rng = seed_everything(seed)
    with timed() as clock:
        costs = load_costs()
        long = instance_gaps(costs)
        gaps = _gap_table(long)
        difference = _difference(long, size.bootstrap, rng)
        sample = live_sample(costs["instance"].unique().tolist(), size.live_per_variant, seed)
        batch, keys = _live_batch(sample)
        live, recorded = _live(batch, keys, costs)
        picture_instance = int(np.random.default_rng([seed, 1]).choice(sorted(costs["instance"].unique())))
        py_rows, stops = _pyvrp_live(picture_instance, PICTURE_VARIANTS[:size.pyvrp_live], costs)
        live = pd.concat([live, py_rows], ignore_index=True)
        firsts = {v: idx[0] for v, idx in sample.items()}
        gates = gate_trace(policy("ccl", 0), concat([test_instance(v, i) for v, i in firsts.items()]))
        gates["instance"] = gates["variant"].map(firsts)
        reference = costs.groupby(["variant", "ood"], as_index=False, sort=False).agg(pyvrp=("pyvrp", "mean"))
        tables = {
            "reference": reference,
            "gaps": gaps,
            "summary": _summary(gaps),
            "difference": difference,
            "live": live,
            "picture": stops,
            "gates": gates,
            "probe": _probe(batch, recorded),
            "flops": _flops(size.flops_nodes),
            "curves": _curves(),
            "train": _train(),
        }
    return Report("ccl_vrp", scale, seed, tables, _claims(tables), seconds=clock(), chart_builder=charts)


def _per_seed(summary: pd.DataFrame, model: str, column: str) -> list[float]:
    s = summary[summary.model == LABELS[model]].set_index("seed")[column]
    return [float(s[t]) for t in TRAIN_SEEDS]


def _claims(t: dict[str, pd.DataFrame]) -> list[Claim]:
    summary = t["summary"]
    ccl = _per_seed(summary, "ccl", "gap_id")
    static = _per_seed(summary, "static", "gap_id")
    nn = float(summary[summary.model == LABELS["nn"]].gap_id.iloc[0])
    spread = max(abs(g[s] - g[0]) for g in (ccl, static) for s in range(1, len(TRAIN_SEEDS)))
    gaps = t["gaps"]
    shipped_ok = float(gaps[~gaps.ood].passed.min())
    live = t["live"]
    live_ok = 100 * float(live.ok.groupby([live.variant, live.solver]).mean().min())
    by_solver = live.groupby("solver").rel_diff
    live_share = 100 * float(by_solver.apply(lambda r: (r <= LIVE_RTOL).mean()).min())
    live_mean = float(by_solver.mean().max())
    probe = {str(r["policy"]): r for r in t["probe"].to_dict("records")}
    return [
        Claim.over_seeds(
            "near_reference",
            f"CCL's mean gap to PyVRP over the 16 in-distribution variants is at most {GAP_BAR:g} % "
            "(100 test instances per variant, 20 customers; median over the 3 training seeds)",
            ccl, GAP_BAR, "<=",
            paper="CCL's mean in-distribution gap to HGS-PyVRP: 1.28 % at 50 customers, 2.24 % at 100 "
                  "(the authors' result files); the 8 % bar is this book's, for 20 customers and "
                  "minutes of CPU training. Any trained policy passes it: the static decoder does "
                  "too, so it checks the training, not CCL",
            kind="sanity", source="prior", control=STATIC_CONTROL, control_values=static),
        Claim.over_seeds(
            "near_reference_nn",
            f"CCL's mean in-distribution gap is at most {NN_RATIO:g}x nearest neighbour's "
            "(median over the 3 training seeds)",
            [g / nn for g in ccl], NN_RATIO, "<=",
            paper="the paper compares with neural solvers and OR solvers, not with a construction "
                  "heuristic; the 0.5x bar is this book's. The static decoder passes it too",
            kind="sanity", source="prior", control=STATIC_CONTROL, control_values=[g / nn for g in static]),
        Claim.over_seeds(
            "ccl_vs_static",
            f"CCL's mean in-distribution gap is at most {STATIC_RATIO:g}x the static decoder's, both "
            "trained for the same steps; ratio per training seed (CCL seed s against static seed s), "
            "median over the 3 seeds",
            [c / s for c, s in zip(ccl, static, strict=True)], STATIC_RATIO, "<=",
            paper="CCL against MTPOMO at 50 customers: 0.98 vs 1.42 % (CVRP), 1.96 vs 3.19 % (OVRP), "
                  "0.98 vs 2.42 % (VRPTW), 0.54 vs 1.56 % (OVRPTW), about 0.5x (a third-party "
                  "transcription of the paper's table)",
            # the 0.8 bar is this book's (the paper's ratio is about 0.5)
            expected=False, kind="paper", source="prior",
            no_control="the claim is itself the comparison with the ablation: the static decoder, "
                       "the same encoder, training loop, batches and steps without the chain of context",
            regime=REGIME),
        Claim.paired(
            "ccl_noninferior",
            f"CCL is not worse than the static decoder by more than {NONINFERIOR_MARGIN:g} point: the "
            "mean in-distribution gap of CCL minus the static decoder's, paired by training seed, "
            f"is at most {NONINFERIOR_MARGIN:g} point, median and whole 95 % t interval (3 seeds)",
            ccl, static, NONINFERIOR_MARGIN, "<=",
            paper="the paper claims superiority (about 0.5x MTPOMO's gap); non-inferiority is the "
                  "spec's weaker acceptance criterion A3 for this CPU scale",
            kind="derivation", source="prior", regime=REGIME),
        Claim(
            "probe_gain",
            "a ridge probe predicts each node's visit state (the share of the trajectories that have "
            "served it) better from CCL's re-embedded node embeddings at that step than from the "
            f"encoder's: held-out R^2 gain >= {PROBE_GAIN:g} (shipped seed-0 CCL, the live sample)",
            float(probe[LABELS["ccl"]]["gain"]), PROBE_GAIN, ">=",
            paper="the paper argues that step-dependent node embeddings align nodes with the "
                  "trajectories' context; it reports no measurement of it",
            # pilot: marked not expected after it failed at seeds 0 to 4 (threshold unchanged)
            expected=False, kind="derivation", source="pilot"),
        Claim(
            "feasible",
            "every solution passes the independent checker on every in-distribution variant: the "
            "smallest pass rate, in percent, over (solver, variant) cells of the shipped costs "
            "(nearest neighbour and the six policies; PyVRP's are checked when solved) and of the "
            f"live re-run (shipped: {shipped_ok:.4g} %, live: {live_ok:.4g} %)",
            min(shipped_ok, live_ok), 100.0, ">=",
            paper="the paper's environment masks infeasible moves; no independent check is reported",
            kind="sanity", source="prior"),
        Claim(
            "live_matches_shipped",
            "the live re-run reproduces the shipped costs: for each solver (both policies of seed 0, "
            f"nearest neighbour, PyVRP) at least {LIVE_SHARE:g} % of the live costs equal the shipped "
            f"ones to a relative {LIVE_RTOL:g} (smallest share over the solvers, in percent; a rare "
            "argmax flip on another CPU is tolerated)",
            live_share, LIVE_SHARE, ">=",
            paper="no counterpart: this checks that the shipped CSV is what the shipped code computes",
            kind="sanity", source="prior"),
        Claim(
            "live_mean_difference",
            "the live costs are close to the shipped ones on average: per solver, the mean relative "
            f"difference between live and shipped costs is at most {LIVE_MEAN:g} (largest over the "
            "solvers)",
            live_mean, LIVE_MEAN, "<=",
            paper="no counterpart: it bounds what the tolerated mismatches of live_matches_shipped "
                  "may cost",
            kind="sanity", source="prior"),
        Claim(
            "training_reproducible",
            "training is reproducible across seeds: the mean in-distribution gaps of the seed-1 and "
            f"seed-2 runs are within {SEED_SPREAD:g} point of the shipped seed-0 run's, for both models "
            "(largest absolute difference, percentage points)",
            spread, SEED_SPREAD, "<=",
            paper="the paper reports one training run per model (seed 69420 in the released configs)",
            kind="sanity", source="prior"),
    ]


def numbers(report: Report) -> dict[str, float]:
    """Numbers the chapter's prose quotes that are not a claim's value, read from ``report.tables``
    (per model: the median over training seeds, and its min and max)."""
    t = report.tables
    s = t["summary"]
    ref = t["reference"]
    out: dict[str, float] = {f"ref_{v}": float(c) for v, c in zip(ref.variant, ref.pyvrp, strict=True)}
    for key, model in (("ccl", "ccl"), ("static", "static"), ("nn", "nn")):
        g = s[s.model == LABELS[model]]
        for col in ("gap_id", "gap_ood", "passed_ood", "passed_ood_env"):
            out[f"{key}_{col}"] = float(g[col].median())
            out[f"{key}_{col}_lo"] = float(g[col].min())
            out[f"{key}_{col}_hi"] = float(g[col].max())
    out["ccl_failed_ood"] = 100 - out["ccl_passed_ood"]
    g = t["gaps"]
    ind_gaps = g[~g.ood]
    tw = ind_gaps.variant.str.endswith("TW")
    for key, model in (("ccl", "ccl"), ("static", "static"), ("nn", "nn")):
        mine = ind_gaps.model == LABELS[model]
        for part, rows in (("tw", tw), ("notw", ~tw)):
            per_seed = ind_gaps[mine & rows].groupby("seed").gap.mean()
            out[f"{key}_gap_{part}"] = float(per_seed.median())
    d = t["difference"]
    ind = d[~d.ood]
    out["diff_below"] = float((ind.hi < 0).sum())
    out["diff_above"] = float((ind.lo > 0).sum())
    out["diff_variants"] = float(len(ind))
    out["diff_mean"] = float(ind.difference.mean())
    live = t["live"]
    out["live_instances"] = float(len(live[live.solver == "ccl_0"]))
    out["pyvrp_live"] = float((live.solver == "pyvrp").sum())
    out["live_max_rel"] = float(live.rel_diff.max())
    out["live_rows"] = float(len(live))
    out["live_mismatches"] = float((live.rel_diff > LIVE_RTOL).sum())
    dm = d[d.ood]
    no_tw = ~dm.variant.str.endswith("TW")
    out["ood_pos_notw"] = float((dm[no_tw].difference > 0).sum())
    out["ood_notw"] = float(no_tw.sum())
    out["ood_neg_tw"] = float((dm[~no_tw].difference < 0).sum())
    out["ood_tw"] = float((~no_tw).sum())
    neural = s[s.model.isin([LABELS["ccl"], LABELS["static"]])]
    out["neural_passed_ood_env_min"] = float(neural.passed_ood_env.min())
    pr = {str(r["policy"]): r for r in t["probe"].to_dict("records")}
    out["probe_r2_step"] = float(pr[LABELS["ccl"]]["r2_step"])
    out["probe_r2_encoder"] = float(pr[LABELS["ccl"]]["r2_encoder"])
    out["probe_static_gain"] = float(pr[LABELS["static"]]["gain"])
    out["probe_drift"] = float(pr[LABELS["ccl"]]["drift"])
    c = t["curves"]
    last = c[c.step == c.step.max()]
    for key, model in (("ccl", "ccl"), ("static", "static")):
        cpu = last[last.model == LABELS[model]].cpu_s / 60
        out[f"{key}_train_min"] = float(cpu.median())
        out[f"{key}_train_min_lo"] = float(cpu.min())
        out[f"{key}_train_min_hi"] = float(cpu.max())
    # independent seed blocks of the gap claims: 7 more blocks of 3 training pairs each
    out["retrain_hours"] = 21 * (out["ccl_train_min"] + out["static_train_min"]) / 60
    out["train_steps"] = float(c.step.max())
    out["train_instances"] = float(t["train"].instances.median())
    # how much the training-batch cost still fell over the last 300 steps (against the 300 before)
    top = float(c.step.max())
    for key, model in (("ccl", "ccl"), ("static", "static")):
        drops = []
        for _, run in c[c.model == LABELS[model]].groupby("seed"):
            late = run[run.step > top - 300].cost.mean()
            before = run[(run.step > top - 600) & (run.step <= top - 300)].cost.mean()
            drops.append(100 * (1 - late / before))
        out[f"{key}_late_drop"] = float(np.median(drops))
    f = t["flops"].pivot(index="customers", columns="scheme", values="flops")
    ratio = f["per trajectory"] / f["shared (TSNR)"]
    for col, key in (("per trajectory", "per"), ("shared (TSNR)", "shared")):
        out[f"flops_slope_{key}"] = loglog_slope(f.index.to_numpy(float), f[col].to_numpy(float))[0]
    out["flops_ratio_20"] = float(ratio.get(20, math.nan))
    out["flops_ratio_max"] = float(ratio.iloc[-1])
    out["flops_nodes_max"] = float(ratio.index[-1])
    return out
