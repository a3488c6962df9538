"""The DES-LOC chapter's experiments: ``reproduce()``, ``launch()``, claims, charts and explorer.

The training functions of :mod:`iclr_lab.distributed.desloc.training` are written once against
the :class:`~iclr_lab.core.collective.Collective` interface: :func:`launch` runs Experiment A's
methods on whatever collective it is given (``iclr-lab launch desloc`` passes it real
``torch.distributed`` processes), and ``reproduce`` runs Experiments B and C on the thread
simulator. For Experiment A, ``reproduce`` trains every worker of every seed of a method in one
stacked pass (:func:`~iclr_lab.distributed.desloc.stacked.train_stacked`, the same DES-LOC
optimizer on stacked tensors, the all-reduce a mean over the worker rows): its tables equal those
of :func:`~iclr_lab.distributed.desloc.training.train_worker` on the thread simulator bit for bit
(the tests check it), at a fraction of the per-step overhead.

* Experiment A (the claims): an MLP on scikit-learn's digits, the training set sorted by label and
  cut into one shard per worker, trained with DES-LOC, Local Adam at ``Kx`` and at ``2 Kx`` (the
  same bytes as DES-LOC), the keep-local and reset heuristics, Local SGD and DDP; then DES-LOC with
  ``Kx`` and with ``Kv`` multiplied by 2 and 4.
* Experiment B (a picture): the Rosenbrock toy with IID gradient noise, the averaged iterate of
  each method.
* Experiment C (the theory): the drift of Adam's two moments over ``K`` local steps against the
  bounds of ``desloc-eq-drift``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from iclr_lab.core.collective import Collective, CommCounts, comm_seconds
from iclr_lab.core.progress import progress
from iclr_lab.core.report import Claim, Report, timed
from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.validation import check_choice, check_range, check_seed
from iclr_lab.core.worker_data import RosenbrockToy
from iclr_lab.distributed.desloc.optimizer import communication_cost, half_life, units_per_step
from iclr_lab.distributed.desloc.stacked import rosenbrock_stacked, train_stacked
from iclr_lab.distributed.desloc.training import (
    DDP,
    DESLOC_NAME,
    KEEP,
    LOCAL_ADAM,
    LOCAL_ADAM_2,
    LOCAL_SGD,
    METHODS,
    RESET,
    DigitsSetup,
    Method,
    RosenbrockSetup,
    drift_run,
    main_methods,
    model_bytes,
    sweep_methods,
    train_worker,
)

if TYPE_CHECKING:
    import altair as alt

    from iclr_lab.core.tuning import Tuned

#: one colour per method in every chart: DES-LOC in the method red, the baselines muted
#: (iclr_lab.core.charts.METHOD_COLORS[0] and BASELINE_COLORS, written out so that the module does
#: not import altair)
COLORS = {DESLOC_NAME: "#d62728", LOCAL_ADAM: "#4c78a8", LOCAL_ADAM_2: "#8c8c8c", KEEP: "#72a17b",
          RESET: "#a48cb5", LOCAL_SGD: "#b7a16a", DDP: "#5b6770"}

__all__ = ["budget_chart", "charts", "explorer", "launch", "numbers", "reproduce", "tuned_rates"]

INF = math.inf


# ---------------------------------------------------------------------------------------------
# Experiment A and B: runs on the simulator
# ---------------------------------------------------------------------------------------------

def _final_rows(curves: pd.DataFrame) -> pd.DataFrame:
    last = curves.loc[curves.groupby(["method", "seed"], sort=False)["step"].idxmax()]
    final = last.rename(columns={"loss": "final_loss"})
    cols = ["method", "seed", "final_loss", "test_loss", "test_acc", "bytes", "rounds", "bytes_parameters",
            "bytes_gradients", "bytes_first_moment", "bytes_second_moment"]
    return final[cols].reset_index(drop=True)


def _rosenbrock_methods(kx: int) -> list[Method]:
    return [Method(DESLOC_NAME, (kx, 3 * kx, 6 * kx)), Method(LOCAL_ADAM, (kx, kx, kx)),
            Method(KEEP, (kx, INF, INF)), Method(RESET, (kx, INF, INF), reset_states=True)]


def _rosenbrock(setup: RosenbrockSetup, seed: int) -> pd.DataFrame:
    toy = RosenbrockToy(noise=setup.noise)
    rows = []
    for method in _rosenbrock_methods(setup.kx):
        # all workers in one stacked tensor: the threaded rosenbrock_worker runs to rounding
        # (tests/distributed/test_desloc.py)
        mean = rosenbrock_stacked(method, setup, seed).mean(dim=1).numpy()
        steps = np.arange(len(mean)) * setup.record_every
        err = np.linalg.norm(mean - toy.optimum, axis=1)
        rows.append(pd.DataFrame({"method": method.name, "step": steps, "x1": mean[:, 0],
                                  "x2": mean[:, 1], "error": err, "seed": seed}))
    return pd.concat(rows, ignore_index=True)


# ---------------------------------------------------------------------------------------------
# reproduce
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Sizes:
    workers: int
    kx: int
    seeds: int
    setup: DigitsSetup
    rosenbrock: RosenbrockSetup
    drift_windows: tuple[int, ...]


def _sizes(scale: str) -> _Sizes:
    book = DigitsSetup()
    return pick({
        "smoke": _Sizes(workers=2, kx=4, seeds=1, setup=replace(book, steps=48, warmup=2, eval_every=4),
                        rosenbrock=RosenbrockSetup(workers=2, steps=48, kx=8, record_every=8),
                        drift_windows=(1, 4, 16)),
        "book": _Sizes(workers=8, kx=16, seeds=3, setup=book, rosenbrock=RosenbrockSetup(),
                       drift_windows=(1, 2, 4, 8, 16, 32, 64, 128)),
        "paper": _Sizes(workers=8, kx=16, seeds=5, setup=replace(book, steps=1536, warmup=51),
                        rosenbrock=RosenbrockSetup(workers=32, steps=4800, lr=0.02, kx=64),
                        drift_windows=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512)),
    }, scale)


#: the two data splits of Experiment A, the paper's regime first: IID shards (the paper's runs shard
#: one corpus uniformly) and label-sorted shards (two or three classes per worker)
SPLITS = ("iid", "sorted")
SPLIT_NAMES = {"iid": "IID", "sorted": "label-sorted"}
REGIMES = {
    "iid": "paper's regime: IID shards (the paper's language-model runs give every worker a uniform "
           "share of one corpus); here the digits training set is shuffled and cut into one shard "
           "per worker; held-out loss of the averaged model (the test split): the paper reports "
           "training perplexity on a corpus seen about once, where it is a held-out loss, while "
           "these workers memorise their shards",
    "sorted": "the chapter's second regime, not the paper's: label-sorted shards (each worker holds "
              "two or three classes), where every state drifts between averages far more than on "
              "IID data; held-out loss of the averaged model (the test split)",
}
#: the methods whose peak rate is tuned (every Adam method of the claims); Local SGD and DDP are
#: reference points of the charts, at their recipe's rates, and enter no paper claim
TUNED = (DESLOC_NAME, LOCAL_ADAM, LOCAL_ADAM_2, KEEP, RESET)
#: the rate grid of every tuned method: 3 points a factor 3 apart around the recipe's 3e-3
#: (core.tuning.log_grid), extended once by core.tuning.tune when the choice is at an edge
TUNE_POINTS, TUNE_RATIO = 3, 3.0
#: tuning seeds per method (core.tuning.tuning_seeds: disjoint from the judging seeds)
TUNING_SEEDS = 1


def _tuned_methods(kx: int, rates: dict[str, float] | None) -> list[Method]:
    """Experiment A's methods with the tuned peak rates (``rates``: method -> rate)."""
    rates = rates or {}
    return [replace(m, lr=rates.get(m.name)) for m in main_methods(kx)]


def launch(comm: Collective, scale: str = "book", seed: int = 0, split: str = "iid",
           rates: dict[str, float] | None = None) -> dict[str, pd.DataFrame]:
    """Experiment A's methods (one seed, one split) on the workers of ``comm``: the function that
    ``iclr-lab launch desloc`` runs on real ``torch.distributed`` processes.

    Every process calls it with its own collective; the shards follow ``comm.world_size``. Each
    method runs at its rate in ``rates`` (method name -> peak rate; by default none: the recipe's
    ``3e-3`` for every Adam method, untuned). With the rates :func:`reproduce` chose
    (:func:`tuned_rates`) the tables are those of :func:`reproduce` for that seed and split
    (``curves``: one row per method and evaluation; ``final``: one row per method), so a real run
    and the simulator can be compared number for number.

    Raises:
        TypeError, ValueError: ``comm`` is not a collective, ``scale`` not a scale, ``seed`` not an
            integer in [0, 2**32 - 1], ``split`` not ``"iid"`` or ``"sorted"``, or ``rates`` naming a
            method that is not one of :data:`~iclr_lab.distributed.desloc.training.METHODS` or a
            rate outside (0, inf).
    """
    if not isinstance(comm, Collective):
        raise TypeError(f"comm must be an iclr_lab.core.collective.Collective, "
                        f"got {type(comm).__name__}")
    seed = check_seed(seed)
    check_choice("split", split, SPLITS)
    if rates is not None:
        if not isinstance(rates, dict):
            raise TypeError(f"rates must be a dict of method name -> rate, got {type(rates).__name__}")
        for name, rate in rates.items():
            if name not in METHODS:
                raise ValueError(f"rates must map names of METHODS to rates, got the key {name!r}")
            check_range(f"rates[{name!r}]", rate, 0, INF, low_open=True, high_open=True)
    size = _sizes(scale)
    setup = replace(size.setup, split=split)
    logs = [train_worker(comm, m, setup, seed).assign(seed=seed)
            for m in _tuned_methods(size.kx, rates)]
    if comm.rank != 0:
        return {"curves": pd.DataFrame(), "final": pd.DataFrame()}
    curves = pd.concat(logs, ignore_index=True)
    return {"curves": curves, "final": _final_rows(curves)}


def tuned_rates(report: Report) -> dict[str, float]:
    """The peak rate tuning chose for each tuned method in ``report`` (method name -> rate)."""
    return {t.method: t.choice for t in report.tuning}


#: the paper's setting for its headline arithmetic: Kx = 256 with Ku = 3 Kx and Kv = 6 Kx
PAPER_PERIODS = (256, 768, 1536)
#: one model-sized all-reduce takes as long as this many local steps in the simulated wall-clock
#: (a network where DDP spends half its time communicating)
COMM_STEPS = 1.0
#: "DES-LOC matches Local Adam": final held-out loss <= MATCH_FACTOR x Local Adam's + MATCH_SLACK
#: (the two numbers fixed before any run of this experiment; the metric was the final training
#: loss until a review found that on IID shards, where it is about 1e-3, the slack alone decided
#: the test, and it moved to the held-out loss, of order 0.1, before the runs that judge it)
MATCH_FACTOR = 1.05
MATCH_SLACK = 0.01
#: the heuristics' bar (pilot: suggested by a pre-check of the label-sorted experiment; the
#: reproduction plan had asked for a report-only 2x)
HEURISTIC_BAR = 1.5


def _tune(setup: DigitsSetup, size: _Sizes, seed: int) -> list[Tuned]:
    """Tune the peak rate of every method in :data:`TUNED` on ``setup``'s split (the paper's IID
    regime; both splits then run at these rates, so that the split is the only change between
    their rows).

    Every method gets the same grid (:data:`TUNE_POINTS` points a factor :data:`TUNE_RATIO` apart
    around the recipe's rate) and the same objective: the median final **validation** loss over
    :func:`~iclr_lab.core.tuning.tuning_seeds` (never the judging seeds), the cross-entropy of the
    averaged model on a validation split cut from the training images
    (:attr:`~iclr_lab.distributed.desloc.training.DigitsSetup.validation`; the shards are cut from
    the rest), never on the test images that judge the claims. The objective was the final
    training loss until the claims moved to the held-out loss; it followed them (the chapter says
    why). The tuning runs evaluate only at the end, which changes no step of training.
    """
    from iclr_lab.core.tuning import tune, tuning_seeds

    seeds = tuning_seeds(seed, TUNING_SEEDS)
    quiet = replace(setup, eval_every=setup.steps, validation=True)
    methods = {m.name: m for m in main_methods(size.kx)}
    out = []
    for name in TUNED:
        def score(values: Sequence[float], name: str = name) -> list[float]:
            res = []
            for lr in values:
                runs = train_stacked(replace(methods[name], lr=float(lr)), quiet, seeds, size.workers)
                # test_loss of a validation setup reads the validation split
                res.append(float(np.median([r["test_loss"].iloc[-1] for r in runs])))
            return res

        t = tune(name, score, setup.lr, points=TUNE_POINTS, ratio=TUNE_RATIO)
        out.append(t)
    return out


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Run Experiments A (on both splits, IID first), B and C at ``scale`` (seeds ``seed, seed+1,
    ...``); return the report.

    Claims, one per split: DES-LOC matching Local Adam, equal bytes but a lower loss than Local Adam
    at ``2 Kx``, the failure of the two heuristics, and ``Kv`` mattering less than ``Kx``; and the
    byte count (``desloc-eq-cost``).

    Raises:
        TypeError, ValueError: ``scale`` is not a scale, or ``seed`` not an integer in
            [0, 2**32 - 1].
    """
    seed = check_seed(seed)
    size = _sizes(scale)
    rng = seed_everything(seed)
    del rng  # every random source below is derived from the seeds themselves
    seeds = [seed + i for i in range(size.seeds)]
    with timed() as elapsed:
        # tuning in the paper's regime (IID); both splits run at the rates it chose
        tuned = _tune(replace(size.setup, split=SPLITS[0]), size, seed)
        rates = {t.method: t.choice for t in tuned}
        parts: dict[str, list[pd.DataFrame]] = {"curves": [], "final": [], "sweep": []}
        for split in progress(SPLITS, desc="desloc", total=len(SPLITS)):
            setup = replace(size.setup, split=split)
            jobs: list[tuple[str, int, Method]] = [
                ("main", 1, m) for m in _tuned_methods(size.kx, rates)]
            jobs += [(sw, mult, replace(m, lr=rates[DESLOC_NAME]))
                     for sw, mult, m in sweep_methods(size.kx)]
            # every worker of every seed of one method in one stacked pass, equal bit for bit to
            # run_simulated(train_worker) per seed (stacked.py; tests/distributed/test_desloc.py)
            runs = {method.name: train_stacked(method, setup, seeds, size.workers)
                    for _, _, method in jobs}
            logs = [runs[method.name][i].assign(seed=s, sweep=swept, multiplier=mult)
                    for i, s in enumerate(seeds) for swept, mult, method in jobs]
            for key, table in _tables(pd.concat(logs, ignore_index=True), size).items():
                parts[key].append(table.assign(split=SPLIT_NAMES[split]))
        tables = {k: pd.concat(v, ignore_index=True) for k, v in parts.items()}
        tables["tuning"] = pd.DataFrame([
            {"method": t.method, "lr": lr, "tuning_loss": sc, "chosen": lr == t.choice}
            for t in tuned for lr, sc in zip(t.grid, t.scores, strict=True)])
        tables["rosenbrock"] = _rosenbrock(size.rosenbrock, seed)
        tables["drift"] = drift_run(size.setup, seed, size.drift_windows)
        claims, tables["acceptance"] = _claims(tables, size)
    return Report("desloc", scale, seed, tables, claims, seconds=elapsed(), chart_builder=charts,
                  tuning=tuned)


def _tables(curves: pd.DataFrame, size: _Sizes) -> dict[str, pd.DataFrame]:
    step_seconds = 1.0
    payload = model_bytes(size.setup)
    # bandwidth at which one model-sized ring all-reduce takes COMM_STEPS local steps
    bandwidth = 2 * (size.workers - 1) / size.workers * payload / (COMM_STEPS * step_seconds)
    curves = curves.copy()
    counts = [CommCounts({"parameters": int(b)}, {"parameters": int(r)})
              for b, r in zip(curves["bytes"], curves["rounds"], strict=True)]
    curves["sim_time"] = curves["step"] * step_seconds + [
        comm_seconds(c, size.workers, bandwidth=bandwidth) for c in counts]
    curves["units"] = curves["bytes"] / payload
    main = curves[curves["sweep"] == "main"].drop(columns=["sweep", "multiplier"])
    final = _final_rows(main)
    final["units_per_step"] = final["bytes"] / payload / size.setup.steps
    # the sweeps: multiplier 1 is the main DES-LOC run
    base = curves[(curves["sweep"] == "main") & (curves["method"] == DESLOC_NAME)]
    parts = [base.assign(sweep=s, multiplier=1) for s in ("Kx", "Kv")]
    parts.append(curves[curves["sweep"] != "main"])
    sweep = pd.concat(parts, ignore_index=True)
    sweep["swept"] = sweep["sweep"].map({"Kx": "Kx × m (Ku, Kv fixed)", "Kv": "Kv × m (Kx, Ku fixed)"})
    keep = ["swept", "sweep", "multiplier", "method", "seed", "step", "loss", "test_loss", "units"]
    return {"curves": main.reset_index(drop=True), "final": final,
            "sweep": sweep[keep].reset_index(drop=True)}


def _per_seed(final: pd.DataFrame, method: str, column: str = "final_loss") -> pd.Series:
    return final[final["method"] == method].set_index("seed")[column].sort_index()


def _claims(tables: dict[str, pd.DataFrame], size: _Sizes) -> tuple[list[Claim], pd.DataFrame]:
    final_all, sweep_all = tables["final"], tables["sweep"]
    steps, kx = size.setup.steps, size.kx
    first = final_all[final_all["split"] == SPLIT_NAMES[SPLITS[0]]]

    def bytes_of(method: str) -> float:
        b = first[first["method"] == method]
        sent = b["bytes_parameters"] + b["bytes_first_moment"] + b["bytes_second_moment"]
        return float(sent.iloc[0])

    byte_ratio = bytes_of(DESLOC_NAME) / bytes_of(LOCAL_ADAM)
    expected = communication_cost((kx, 3 * kx, 6 * kx), steps, model_bytes(size.setup))
    counted_ok = bytes_of(DESLOC_NAME) == expected.total_bytes
    paper_ratio = 1.0 / units_per_step(PAPER_PERIODS)
    by_split = {split: _split_claims(final_all[final_all["split"] == SPLIT_NAMES[split]],
                                     sweep_all[sweep_all["split"] == SPLIT_NAMES[split]], size, split)
                for split in SPLITS}
    # claim by claim, the paper's regime (IID) first
    claims = [c for pair in zip(*(by_split[s][0] for s in SPLITS), strict=True) for c in pair]
    claims.append(
        Claim("bytes_half",
              f"DES-LOC at (Kx, Ku, Kv) = ({kx}, {3 * kx}, {6 * kx}) sends exactly 0.5x the bytes of "
              f"Local Adam at K = {kx}, counted by the collective over T = {steps} steps (a "
              "multiple of every period); the count also equals the formula (desloc-eq-cost)"
              + ("" if counted_ok else " [IT DOES NOT]") + ".",
              byte_ratio if counted_ok else math.nan, (0.5, 0.5), "in",
              paper=f"2x less than Local Adam and 170x less than DDP (1/Kx + 1/Ku + 1/Kv at Kx = 256: "
                    f"DDP sends {paper_ratio:.1f}x more)",
              kind="derivation", source="prior"))
    acceptance = pd.concat([by_split[s][1] for s in SPLITS], ignore_index=True)
    return claims, acceptance


#: what each split expects of each claim. On the training loss the expectations were set before the
#: book-scale run that judged them, from the outside review's untuned runs at lr 3e-3 (IID: DES-LOC
#: within the tolerance of Local Adam, the heuristics at 0.67-1.09x Local Adam; label-sorted: 1.195
#: against the tolerance, heuristics at 3.6x and 4.6x; equal bytes and Kv hold on both). The
#: held-out loss had no prior numbers: these flags were set from its first book run (seeds 0-2),
#: and set again from the first book run after the tuning objective moved to the validation loss,
#: so that the build fails if the numbers move; they decide no verdict (the verdict is the
#: method's and the control's pass or fail at the seed blocks)
EXPECTED = {
    "iid": {"matches_local_adam": True, "equal_bytes_better_loss": False,
            "keep_local_fails": False, "reset_fails": False, "kv_matters_less": True},
    "sorted": {"matches_local_adam": False, "equal_bytes_better_loss": True,
               "keep_local_fails": True, "reset_fails": True, "kv_matters_less": True},
}


def _split_claims(final: pd.DataFrame, sweep: pd.DataFrame, size: _Sizes,
                  split: str) -> tuple[list[Claim], pd.DataFrame]:
    kx = size.kx
    seeds = sorted(final["seed"].unique())
    held_out = {m: _per_seed(final, m, "test_loss") for m in METHODS}
    regime, exp, tag = REGIMES[split], EXPECTED[split], SPLIT_NAMES[split]

    def tolerance(method: str) -> pd.Series:
        # the tolerance of "matches Local Adam", fixed before any run: 5% plus 0.01 nats, on the
        # held-out loss (O(0.1), so that the slack is a minor part of the tolerance): on the
        # training loss, about 1e-3 on IID shards at the rate the training-loss tuning chose
        # (0.027), the slack let any method below 0.01 match
        return held_out[method] / (MATCH_FACTOR * held_out[LOCAL_ADAM] + MATCH_SLACK)

    # every ratio below reads the held-out loss too: on IID shards the training losses were about
    # 1e-3 at that rate (reset's 1e-5), so their ratios measured how fast each method memorised,
    # and moved with the CPU's rounding (reset's IID ratio 0.04 on one machine, 0.02 on another)
    equal_bytes = held_out[DESLOC_NAME] / held_out[LOCAL_ADAM_2]
    strongest = held_out[LOCAL_ADAM] / held_out[LOCAL_ADAM_2]
    keep = held_out[KEEP] / held_out[LOCAL_ADAM]
    reset = held_out[RESET] / held_out[LOCAL_ADAM]
    desloc_vs_la = held_out[DESLOC_NAME] / held_out[LOCAL_ADAM]

    def spread(swept: str) -> pd.Series:
        fin = sweep[sweep["sweep"] == swept]
        fin = fin.loc[fin.groupby(["multiplier", "seed"])["step"].idxmax()]
        return fin.groupby("seed")["test_loss"].agg(lambda v: float(v.max() - v.min())).sort_index()

    kv_over_kx = spread("Kv") / spread("Kx")
    tuned = ("every Adam method at the peak rate core.tuning chose for it by the validation loss "
             "of IID tuning runs")
    moved = "the metric moved from the final training loss to the held-out loss after the first runs"
    claims = [
        Claim.over_seeds(f"matches_local_adam_{split}",
                         f"{tag} shards: DES-LOC's final held-out loss (cross-entropy on the "
                         f"test split) is within the tolerance of Local Adam's at the same Kx = "
                         f"{kx} (twice DES-LOC's bytes): loss / ({MATCH_FACTOR:g} x Local Adam's + "
                         f"{MATCH_SLACK:g}) <= 1 (median over seeds; tolerance fixed before any "
                         f"run; {moved}; {tuned}).",
                         tolerance(DESLOC_NAME).tolist(), 1.0, "<=",
                         paper="DES-LOC matches Local Adam at Kx with half its communication (at "
                               "billion scale: ICL average 51.6 against 51.8)",
                         expected=exp["matches_local_adam"], kind="paper", source="pilot",
                         control=f"Local Adam at 2Kx = {2 * kx} (DES-LOC's bytes, all three states "
                                 "on one clock), through the same test",
                         control_values=tolerance(LOCAL_ADAM_2).tolist(), regime=regime),
        Claim("equal_bytes_better_loss_" + split,
              f"{tag} shards: on every seed, DES-LOC's final held-out loss is below that of Local "
              f"Adam at period 2Kx = {2 * kx}, which sends the same bytes ({size.workers} workers; "
              f"{tuned}; {moved}): the worst ratio over seeds is < 1.",
              float(equal_bytes.max()), 1.0, "<",
              paper="implied by the paper's result: DES-LOC matches Local Adam at Kx with half "
                    "its bytes, so it should beat Local Adam at 2Kx, which sends the same bytes",
              expected=exp["equal_bytes_better_loss"], kind="paper", source="pilot",
              no_control="the test is itself the comparison with the ablation at equal bytes "
                         "(Local Adam at 2Kx: the three states on one clock); run on the control "
                         "it scores exactly 1",
              regime=regime),
        Claim.over_seeds(f"keep_local_fails_{split}",
                         f"{tag} shards: keeping the optimizer states local ends at >= "
                         f"{HEURISTIC_BAR:g}x the final held-out loss of Local Adam at K = {kx} "
                         f"(median over seeds; {tuned}; the bar is a pilot choice; {moved}).",
                         keep.tolist(), HEURISTIC_BAR, ">=",
                         paper="heuristics that keep states local or reset them are unstable and "
                               "lack guarantees; on the Rosenbrock toy they oscillate",
                         expected=exp["keep_local_fails"], kind="paper", source="pilot",
                         control="DES-LOC (states averaged on their own periods), through the same "
                                 "test",
                         control_values=desloc_vs_la.tolist(), regime=regime),
        Claim.over_seeds(f"reset_fails_{split}",
                         f"{tag} shards: resetting the optimizer states at every average ends at >= "
                         f"{HEURISTIC_BAR:g}x the final held-out loss of Local Adam at K = {kx} "
                         f"(median over seeds; {tuned}; the bar is a pilot choice; {moved}).",
                         reset.tolist(), HEURISTIC_BAR, ">=",
                         paper="periodically resetting states stalls with repeated oscillations",
                         expected=exp["reset_fails"], kind="paper", source="pilot",
                         control="DES-LOC (states averaged on their own periods), through the same "
                                 "test",
                         control_values=desloc_vs_la.tolist(), regime=regime),
        Claim.over_seeds(f"kv_matters_less_{split}",
                         f"{tag} shards: the final held-out loss varies less when Kv is multiplied "
                         "by 1, 2, 4 (Kx, Ku fixed) than when Kx is (Ku, Kv fixed): range over the "
                         "Kv sweep / range over the Kx sweep < 1 (median over seeds; DES-LOC at its "
                         f"tuned rate; {moved}).",
                         kv_over_kx.tolist(), 1.0, "<",
                         paper="perplexity gets clearly worse as Kx grows; Kv has almost no effect",
                         expected=exp["kv_matters_less"], kind="paper", source="pilot",
                         no_control="the test is itself a comparison of two periods, the Kx sweep "
                                    "being its reference; the Kx sweep against itself scores 1",
                         regime=regime),
    ]
    rows = []
    for i, s in enumerate(seeds):
        rows += [
            {"split": tag, "test": "held-out loss / Local Adam (2Kx), < 1 on every seed",
             "seed": s,
             "DES-LOC": equal_bytes.iloc[i], "Local Adam (Kx), 2x the bytes": strongest.iloc[i]},
            {"split": tag, "test": "held-out loss / Local Adam (Kx), heuristics >= 1.5",
             "seed": s,
             "DES-LOC": desloc_vs_la.iloc[i], "keep local": keep.iloc[i], "reset": reset.iloc[i]},
            {"split": tag, "test": "held-out loss / tolerance around Local Adam (Kx), <= 1",
             "seed": s,
             "DES-LOC": tolerance(DESLOC_NAME).iloc[i],
             "Local Adam (2Kx)": tolerance(LOCAL_ADAM_2).iloc[i]},
        ]
    return claims, pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# numbers for the prose
# ---------------------------------------------------------------------------------------------

def numbers(report: Report) -> dict[str, float]:
    """Every number the chapter's prose quotes that is not a claim's value, computed from
    ``report.tables`` (medians over seeds). Per-split keys end in ``_iid`` or ``_sorted``. The
    chapter glues them."""
    t = report.tables
    out: dict[str, float] = {}
    keys = {DESLOC_NAME: "desloc", LOCAL_ADAM: "la", LOCAL_ADAM_2: "la2", KEEP: "keep",
            RESET: "reset", LOCAL_SGD: "sgd", DDP: "ddp"}
    for split in SPLITS:
        tag = SPLIT_NAMES[split]
        final = t["final"][t["final"]["split"] == tag]
        med = final.groupby("method")["final_loss"].median()
        acc = final.groupby("method")["test_acc"].median()
        held = final.groupby("method")["test_loss"].median()
        units = final.groupby("method")["units_per_step"].first()
        for method, key in keys.items():
            out[f"loss_{key}_{split}"] = float(med[method])
            out[f"test_loss_{key}_{split}"] = float(held[method])
            out[f"acc_{key}_{split}"] = 100 * float(acc[method])
            out[f"units_{key}"] = float(units[method])
        ratio = _per_seed(final, DESLOC_NAME) / _per_seed(final, LOCAL_ADAM)
        out[f"desloc_over_la_{split}"] = float(ratio.median())
        out[f"desloc_over_la_min_{split}"] = float(ratio.min())
        out[f"desloc_over_la_max_{split}"] = float(ratio.max())
        for name in (KEEP, RESET):
            r = _per_seed(final, name) / _per_seed(final, LOCAL_ADAM)
            out[f"{keys[name]}_over_la_{split}"] = float(r.median())
            r = _per_seed(final, name, "test_loss") / _per_seed(final, LOCAL_ADAM, "test_loss")
            out[f"{keys[name]}_over_la_test_{split}"] = float(r.median())
        r = _per_seed(final, DESLOC_NAME, "test_loss") / _per_seed(final, LOCAL_ADAM, "test_loss")
        out[f"desloc_over_la_test_{split}"] = float(r.median())
        r = _per_seed(final, DESLOC_NAME, "test_loss") / _per_seed(final, LOCAL_ADAM_2, "test_loss")
        out[f"equal_bytes_test_min_{split}"] = float(r.min())
        out[f"equal_bytes_test_above_{split}"] = int((r > 1).sum())
        # the claims as they were judged before, on the final training loss
        r = _per_seed(final, DESLOC_NAME) / _per_seed(final, LOCAL_ADAM_2)
        out[f"equal_bytes_train_worst_{split}"] = float(r.max())
        # "matches Local Adam" as it was judged before, on the final training loss (the same
        # 5% plus 0.01 nats), for the chapter's account of the change
        for name, key in ((DESLOC_NAME, "desloc"), (LOCAL_ADAM_2, "la2")):
            r = _per_seed(final, name) / (MATCH_FACTOR * _per_seed(final, LOCAL_ADAM) + MATCH_SLACK)
            out[f"match_train_{key}_{split}"] = float(r.median())
        sw = t["sweep"][t["sweep"]["split"] == tag]
        last = sw.loc[sw.groupby(["sweep", "multiplier", "seed"])["step"].idxmax()]
        med_sweep = last.groupby(["sweep", "multiplier"])["loss"].median()
        top = int(last["multiplier"].max())
        out["sweep_top"] = top
        out[f"sweep_kx_top_{split}"] = float(med_sweep[("Kx", top)])
        out[f"sweep_kv_top_{split}"] = float(med_sweep[("Kv", top)])
        out[f"sweep_base_{split}"] = float(med_sweep[("Kx", 1)])
        held_sweep = last.groupby(["sweep", "multiplier"])["test_loss"].median()
        out[f"sweep_kx_top_test_{split}"] = float(held_sweep[("Kx", top)])
        out[f"sweep_kv_top_test_{split}"] = float(held_sweep[("Kv", top)])
        out[f"sweep_base_test_{split}"] = float(held_sweep[("Kx", 1)])
        rng = last.groupby(["sweep", "seed"])["loss"].agg(lambda v: float(v.max() - v.min()))
        kv_train = np.asarray(rng.xs("Kv"), dtype=float) / np.asarray(rng.xs("Kx"), dtype=float)
        out[f"kv_train_{split}"] = float(np.median(kv_train))
        out["seeds"] = int(final["seed"].nunique())
    for name, lr in tuned_rates(report).items():
        out[f"lr_{keys[name]}"] = lr
    out["paper_ddp_ratio"] = 1.0 / units_per_step(PAPER_PERIODS)
    out["paper_la_ratio"] = units_per_step((256, 256, 256)) / units_per_step(PAPER_PERIODS)
    out["half_life_b1"] = half_life(0.9)
    out["half_life_b2"] = half_life(0.999)
    drift = t["drift"]
    u = drift[drift["state"].str.startswith("first")].set_index("K")
    v = drift[drift["state"].str.startswith("second")].set_index("K")
    out["drift_ratio_u_over_bound"] = float((u["drift"] / u["bound"]).max())
    out["drift_ratio_v_over_bound"] = float((v["drift"] / v["bound"]).max())
    kx = _sizes(report.scale).kx  # a drift window of every scale
    out["drift_k"] = kx
    du, dv = dict(u["drift"].items()), dict(v["drift"].items())
    bu, bv = dict(u["bound"].items()), dict(v["bound"].items())
    out["drift_u_k"], out["drift_v_k"] = float(du[kx]), float(dv[kx])
    out["drift_u_k_of_bound"] = float(du[kx]) / float(bu[kx])
    out["drift_v_k_of_bound"] = float(dv[kx]) / float(bv[kx])
    out["bound_uv_ratio"] = float(bu[kx]) / float(bv[kx])
    rb = t["rosenbrock"]
    ends = rb.loc[rb.groupby("method")["step"].idxmax()]
    error = dict(zip(ends["method"], ends["error"], strict=True))
    for method, key in ((DESLOC_NAME, "desloc"), (LOCAL_ADAM, "la"), (KEEP, "keep"), (RESET, "reset")):
        out[f"rb_err_{key}"] = float(error[method])
    out["rb_err_start"] = float(rb.loc[rb["step"] == 0, "error"].iloc[0])
    return out


# ---------------------------------------------------------------------------------------------
# charts and the explorer
# ---------------------------------------------------------------------------------------------

def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """The chapter's figures, built from ``report.tables``."""
    import altair as alt

    from iclr_lab.core.charts import curves, palette, sweep, thin

    t = report.tables
    order = [m for m in METHODS if m in set(t["curves"]["method"])]
    scale = palette(order, DESLOC_NAME, colors=COLORS)
    final_all = t["final"].assign(units=lambda d: d["bytes"] / model_bytes(DigitsSetup()))
    lo, hi = final_all["units"].min(), final_all["units"].max()
    # the held-out loss, which the claims judge (the training loss is in the curves below)
    y_lo, y_hi = final_all["test_loss"].min() / 1.3, final_all["test_loss"].max() * 1.3
    x = alt.X("units:Q", scale=alt.Scale(type="log", domain=[lo / 1.5, hi * 1.5]),
              title="model-sized all-reduces per worker (whole run)")
    y = alt.Y("test_loss:Q", scale=alt.Scale(type="log", nice=False, domain=[y_lo, y_hi]),
              title="final held-out loss")
    color = alt.Color("method:N", scale=scale, title="method")
    panels, loss_bytes, loss_time = [], [], []
    for split in SPLITS:
        tag = SPLIT_NAMES[split]
        final = final_all[final_all["split"] == tag]
        pts = alt.Chart(final).mark_point(filled=True, size=45, opacity=0.75).encode(
            x=x, y=y, color=color,
            tooltip=["method", "seed", alt.Tooltip("test_loss:Q", format=".4f"), "units:Q"])
        med = final.groupby("method", as_index=False).agg(
            test_loss=("test_loss", "median"), units=("units", "first"))
        ticks = alt.Chart(med).mark_tick(thickness=2, size=26).encode(x=x, y=y, color=color)
        panels.append(alt.layer(ticks, pts).properties(width=250, height=240,
                                                       title=f"{tag} shards"))
        cur = t["curves"][t["curves"]["split"] == tag]
        plot = cur[cur["units"] > 0]
        loss_bytes.append(curves(
            thin(plot, "units", 80, log=True), x="units", y="loss", color="method", log_x=True,
            log_y=True, x_title="model-sized all-reduces so far (per worker)",
            y_title="training loss", highlight=DESLOC_NAME, color_title="method", colors=COLORS,
            title=f"{tag} shards").properties(width=250, height=240))
        loss_time.append(curves(
            cur, x="sim_time", y="loss", color="method", log_y=True,
            x_title=f"simulated time (local steps; one all-reduce = {COMM_STEPS:g} step)",
            y_title="training loss", highlight=DESLOC_NAME, color_title="method", colors=COLORS,
            title=f"{tag} shards").properties(width=250, height=240))
    figs: dict[str, alt.TopLevelMixin] = {
        "final_vs_bytes": alt.hconcat(*panels).resolve_scale(color="shared").properties(
            title="Final held-out loss against communication (dots: seeds; ticks: medians)"),
        "loss_vs_bytes": alt.hconcat(*loss_bytes).resolve_scale(color="shared").properties(
            title="Loss against bytes sent"),
        "loss_vs_time": alt.hconcat(*loss_time).resolve_scale(color="shared").properties(
            title="Loss against simulated wall-clock"),
    }
    sw = t["sweep"]
    sw = sw[sw["split"] == SPLIT_NAMES[SPLITS[0]]]
    # the held-out loss, which the claims judge (the sweep runs record it at every evaluation)
    slider = sweep(
        sw, x="step", y="test_loss", param="multiplier", color="swept", param_label="m",
        log_y=True, start=4, x_title="local step", y_title="held-out loss",
        color_title="DES-LOC with", highlight="Kx × m (Ku, Kv fixed)",
        title="IID shards: multiply one period by m (held-out loss)")
    # the value label goes to the top right corner: the curves start at the top left
    label = slider.layer[-1]
    label.mark = alt.MarkDef(type="text", align="right", baseline="top", fontSize=13,
                             fontWeight="bold")
    label.encoding.x = alt.value(434)
    figs["period_slider"] = slider
    figs["rosenbrock"] = _rosenbrock_chart(t["rosenbrock"])
    figs["drift"] = _drift_chart(t["drift"])
    return figs


def _rosenbrock_chart(rb: pd.DataFrame) -> alt.TopLevelMixin:
    import altair as alt

    from iclr_lab.core.charts import palette

    toy = RosenbrockToy()
    step = 0.1
    g1, g2 = np.arange(-2.0, 2.0 + 1e-9, step), np.arange(-1.0, 3.0 + 1e-9, step)
    grid = np.stack(np.meshgrid(g1, g2), axis=-1).reshape(-1, 2)
    field = pd.DataFrame({"a": grid[:, 0] - step / 2, "a2": grid[:, 0] + step / 2,
                          "b": grid[:, 1] - step / 2, "b2": grid[:, 1] + step / 2,
                          "log10 f": np.log10(toy.loss(grid) + 1e-2)})
    xs = alt.Scale(domain=[-2.05, 2.05], nice=False)
    ys = alt.Scale(domain=[-1.05, 3.05], nice=False)
    heat = alt.Chart(field).mark_rect(opacity=0.55).encode(
        x=alt.X("a:Q", scale=xs, title="x₁", axis=alt.Axis(grid=False)), x2="a2:Q",
        y=alt.Y("b:Q", scale=ys, title="x₂", axis=alt.Axis(grid=False)), y2="b2:Q",
        fill=alt.Fill("log10 f:Q", scale=alt.Scale(scheme="greys", reverse=True), legend=None))
    order = list(dict.fromkeys(rb["method"]))
    scale = palette(order, DESLOC_NAME, colors=COLORS)
    rb = rb.assign(x1=rb["x1"].clip(-2, 2), x2=rb["x2"].clip(-1, 3))

    def path(data: pd.DataFrame, width: float) -> alt.Chart:
        return alt.Chart(data).mark_line(strokeWidth=width).encode(
            x=alt.X("x1:Q", scale=xs), y=alt.Y("x2:Q", scale=ys), order="step:Q",
            color=alt.Color("method:N", scale=scale, title="method"),
            tooltip=["method", "step", alt.Tooltip("x1:Q", format=".3f"),
                     alt.Tooltip("x2:Q", format=".3f")])

    # DES-LOC last and thinner, so that the baselines it overlaps stay visible under it
    others, ours = rb[rb["method"] != DESLOC_NAME], rb[rb["method"] == DESLOC_NAME]
    star = alt.Chart(pd.DataFrame({"x1": [1.0], "x2": [1.0]})).mark_point(
        shape="cross", size=160, color="black", filled=True).encode(
        x=alt.X("x1:Q", scale=xs), y=alt.Y("x2:Q", scale=ys))
    left = alt.layer(heat, path(others, 4), path(ours, 1.5), star).properties(
        width=250, height=250, title="Averaged iterate on Rosenbrock")

    def err(data: pd.DataFrame, width: float) -> alt.Chart:
        return alt.Chart(data[data["step"] > 0]).mark_line(strokeWidth=width).encode(
            x=alt.X("step:Q", title="local step"),
            y=alt.Y("error:Q", scale=alt.Scale(type="log", nice=False), title="‖x̄ − (1, 1)‖"),
            color=alt.Color("method:N", scale=scale, title="method"))

    right = alt.layer(err(others, 4), err(ours, 1.5)).properties(
        width=250, height=250, title="Distance to the minimum")
    return alt.hconcat(left, right).resolve_scale(color="shared")


def _drift_chart(drift: pd.DataFrame) -> alt.TopLevelMixin:
    import altair as alt

    from iclr_lab.core.charts import palette

    states = list(dict.fromkeys(drift["state"]))
    scale = palette(states)
    lo = min(drift["drift"].min(), drift["bound"].min()) / 1.5
    hi = max(drift["drift"].max(), drift["bound"].max()) * 1.5
    x = alt.X("K:Q", scale=alt.Scale(type="log", nice=False), title="steps between averages, K")
    y = alt.Y("drift:Q", scale=alt.Scale(type="log", domain=[lo, hi]),
              title="largest change of a coordinate, ‖Δ‖∞")
    color = alt.Color("state:N", scale=scale, title="state (dashed: its bound)")
    pts = alt.Chart(drift).mark_line(point=True).encode(
        x=x, y=y, color=color,
        tooltip=["state", "K", alt.Tooltip("drift:Q", format=".3g"), alt.Tooltip("bound:Q", format=".3g")])
    bound = alt.Chart(drift).mark_line(strokeDash=[6, 4]).encode(
        x=x, y=alt.Y("bound:Q", scale=alt.Scale(type="log", domain=[lo, hi])), color=color)
    return alt.layer(pts, bound).properties(
        width=440, height=260, title="Drift of the moments over K local steps")


def budget_chart(kx: float = 16, ku_ratio: float = 3.0, kv_ratio: float = 6.0, beta1: float = 0.9,
                 beta2: float = 0.999) -> alt.TopLevelMixin:
    """What a choice of periods costs and what it buys (the chapter's explorer).

    Left: model-sized all-reduces per 1,000 steps (``desloc-eq-cost``) for DDP, Local Adam at
    ``Kx`` and DES-LOC at ``(Kx, ku_ratio * Kx, kv_ratio * Kx)`` (periods rounded to integers).
    Right: each state's half-life (``desloc-eq-halflife``) against its period.

    Args:
        kx: the parameter period, a number in [1, inf), rounded to the nearest integer (the
            explorer's log slider sends floats).
        ku_ratio: ``Ku / Kx``, in (0, inf); ``Ku`` is rounded and at least 1.
        kv_ratio: ``Kv / Kx``, in (0, inf); ``Kv`` is rounded and at least 1.
        beta1: Adam's ``beta1``, in [0, 1).
        beta2: Adam's ``beta2``, in [0, 1).
    """
    import altair as alt

    from iclr_lab.core.charts import palette

    kx = round(check_range("kx", kx, 1, INF))
    ku = max(1, round(check_range("ku_ratio", ku_ratio, 0, INF, low_open=True, high_open=True) * kx))
    kv = max(1, round(check_range("kv_ratio", kv_ratio, 0, INF, low_open=True, high_open=True) * kx))
    b1 = check_range("beta1", beta1, 0, 1, high_open=True)
    b2 = check_range("beta2", beta2, 0, 1, high_open=True)
    names = ["DDP", f"Local Adam (K = {kx})", f"DES-LOC ({kx}, {ku}, {kv})"]
    units = [1.0, units_per_step((kx, kx, kx)), units_per_step((kx, ku, kv))]
    bars = pd.DataFrame({"method": names, "per 1000 steps": [1000 * u for u in units],
                         "from": 0.01, "label": [f"{1000 * u:.4g}" for u in units]})
    scale = palette(names, names[-1])
    base = alt.Chart(bars).encode(
        y=alt.Y("method:N", sort=names, title=None),
        x=alt.X("per 1000 steps:Q", scale=alt.Scale(type="log", domain=[0.01, 3000]),
                title="model-sized all-reduces per 1,000 steps (log)"))
    left = (base.mark_bar().encode(x2="from:Q", color=alt.Color("method:N", scale=scale, legend=None))
            + base.mark_text(align="left", dx=4).encode(text="label:N")).properties(
        width=300, height=110, title=f"DES-LOC sends {units[1] / units[2]:.3g}x less than Local Adam")
    lives = pd.DataFrame({
        "state": ["parameters x", "first moment u", "second moment v"],
        "steps": [kx, ku, kv], "what": "period K",
    })
    lives = pd.concat([lives, pd.DataFrame({
        "state": ["first moment u", "second moment v"],
        "steps": [max(half_life(b1), 0.1), max(half_life(b2), 0.1)], "what": "half-life of β"})])
    right = alt.Chart(lives).mark_point(filled=True, size=90).encode(
        y=alt.Y("state:N", sort=["parameters x", "first moment u", "second moment v"], title=None),
        x=alt.X("steps:Q", scale=alt.Scale(type="log"), title="steps (log)"),
        shape=alt.Shape("what:N", title=None), color=alt.Color("what:N", title=None),
        tooltip=["state", "what", alt.Tooltip("steps:Q", format=".4g")]).properties(
        width=300, height=110, title="Periods against half-lives")
    return alt.vconcat(left, right).resolve_scale(color="independent", shape="independent")


def explorer() -> Any:
    """An ipywidgets explorer of :func:`budget_chart`: the parameter period, the two ratios
    ``Ku/Kx`` and ``Kv/Kx``, and the two betas."""
    from iclr_lab.core.widgets import explorer as make_explorer
    from iclr_lab.core.widgets import log_slider, slider

    return make_explorer(
        budget_chart,
        kx=log_slider("Kx (parameter period)", 16, 1, 1024, steps_per_decade=10),
        ku_ratio=slider("Ku / Kx", 3.0, 1.0, 20.0, 0.5),
        kv_ratio=slider("Kv / Kx", 6.0, 1.0, 50.0, 0.5),
        beta1=slider("β₁", 0.9, 0.0, 0.99, 0.01),
        beta2=slider("β₂", 0.999, 0.9, 0.9999, 0.0001),
    )
