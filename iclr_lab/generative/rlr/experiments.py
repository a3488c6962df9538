"""The RLR chapter's experiments: ``reproduce()``, its claims, charts and explorer.

* Experiment A: every estimator's bias and variance at the pretrained model, against the exact
  gradient ``g*`` (the mean of many full-backprop gradients);
* Experiment B: fine-tuning the per-step adapter (``TinyDiffusion.with_adapter("per_step")``)
  towards one mode with each estimator, every method's learning rate picked from the same grid by
  ``core.tuning.tune`` on a tuning seed, five seeds run side by side (the shared adapter's run,
  no longer repeated, is stored in :mod:`~iclr_lab.generative.rlr.shared_before`);
* the half-order check (``ho_credit``): HO(2) at a fixed start against the summed per-step
  pathwise credits it estimates.

Every chart colours an estimator the same way (:data:`COLORS`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from iclr_lab.core.progress import progress
from iclr_lab.core.report import Claim, Report, timed
from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.tuning import tune, tuning_seeds
from iclr_lab.core.validation import check_int, check_seed
from iclr_lab.generative.rlr.diffusion import PER_STEP_BOUND, TinyDiffusion, pretrain, target_reward
from iclr_lab.generative.rlr.estimators import estimate_gradient, finetune, step_terms

if TYPE_CHECKING:
    import altair as alt

__all__ = ["COLORS", "GRAD_TARGET", "LR_GRID", "TUNE_TARGET", "bias_variance", "charts",
           "explorer", "explorer_chart", "numbers", "reproduce"]

#: the reward of Experiment A pulls samples towards this point (between two modes)
GRAD_TARGET = (2.0, 0.5)
#: the reward of Experiment B pulls samples towards this mode; the other three must be re-routed
TUNE_TARGET = (-2.0, 0.0)
#: Adam learning rates every fine-tuning method chooses from (core.tuning.tune, on its tuning seed;
#: was 0.01, 0.03, 0.1 before issue 23, where the choices sat at both edges)
LR_GRID = (0.003, 0.01, 0.03, 0.1, 0.3)
#: RLR with ZO's perturbation scale s, tuned jointly with its rate in Experiment B (each s gets the
#: whole LR_GRID; the best (s, rate) on the tuning seed wins). Chosen AFTER a reviewer's probe of
#: s = 0.05 / 0.3 / 1.0 on the per-step adapter, i.e. after results were seen, so the per-step
#: claims are source="pilot". Before, s was Experiment A's 0.05, untuned; with the per-step adapter
#: s perturbs the pre-tanh u_t, so the mean moved by only about 0.3 * 0.05 per step.
S_GRID = (0.05, 0.3, 1.0)
#: the per-step claims' values before s was tuned (s = 0.05; stability table of commit 6763d43):
#: the median paired difference at base seed 0 and the blocks (of 8) where the claim held
BEFORE_S_TUNING = {"frac_rlr_zo": 0.358, "rlr_vs_ddpo": -0.498, "rlr_vs_ddpo_k": 0.0,
                   "rlr_vs_trunc1": 0.123, "rlr_vs_trunc1_k": 4.0, "s": 0.05}
Y_CAP = 2.0  # the bias-variance chart's y-axis ends here (RLR with ZO's error bar goes far beyond)
#: the half-order check's sub-chain: HO(2) from x_19 to x_17, the credit of steps 18 and 19 (of
#: T = 20). Chosen for the check's resolution on a probe of the seed-1000 model (3-SE half-width
#: 0.17 / 0.20 / 0.29 / 0.35 of the credit's norm at j = 17 / 13 / 9 / 5 with 40,000 trajectories),
#: before any judging run; the dropped-noise variant failed at every j probed.
HO_J, HO_H = 17, 2
HO_CHUNK = 40_000  # trajectories per batch of the half-order check (memory)

FULL = "full backprop"
TRUNC = "truncated K"  # + the K
DDPO = "DDPO (LR)"
RLR = "RLR, LR in place of ZO (h = 2)"
RLR_ZO = "RLR with ZO (h = 2)"
RLR_CODE = "RLR, code recipe"
TRUNC1 = "truncated K = 1"
#: one colour per estimator across the chapter (RLR's variants warm, the baselines muted)
COLORS = {RLR: "#d62728", RLR_ZO: "#ff7f0e", RLR_CODE: "#9e0142", DDPO: "#4c78a8",
          FULL: "#72a17b", TRUNC1: "#8c8c8c", "truncated K = 2": "#a48cb5",
          "truncated K = 5": "#b7a16a", "truncated K = 10": "#5b6770"}
TRUNC_KS = (1, 2, 5, 10)
#: fine-tuned methods and the estimator settings each uses
TUNED: dict[str, tuple[str, dict[str, Any]]] = {
    TRUNC1: ("truncated", {"K": 1}), DDPO: ("ddpo", {}), RLR: ("rlr", {"h": 2}),
    RLR_ZO: ("rlr", {"h": 2, "zo": True})}
#: the regime of the per-step fine-tuning claims (the chapter's spec's design, not the paper's)
REGIME_PERSTEP = ("chapter's per-step adapter, not the paper's regime: the same 2-D DDPM and trunk, "
                  "one bounded drift of the mean per step (2 numbers, at most 0.3 per coordinate, "
                  "40 in all), 150 Adam steps of 32 trajectories; the paper's analogue is the "
                  "shared-adapter pair")
#: suffix of the per-step adapter's tuning records
PER_STEP = ", per-step adapter"


@dataclass(frozen=True)
class _Sizes:
    pretrain_steps: int
    n_ref: int          # full-backprop trajectories for g*
    n_main: int         # trajectories for DDPO and RLR (the unbiasedness claims)
    n_other: int        # trajectories for the other estimators
    n_zo: int           # trajectories for RLR with zeroth-order terms (a (T, n, d) perturbation)
    n_ho: int           # trajectories for the half-order term of the HO check
    n_ho_fo: int        # trajectories for each step's pathwise credit in the HO check
    tune_steps: int
    runs: int
    eval_every: int
    snapshot_every: int  # the cloud chart embeds (steps / snapshot_every + 1) x 4 x 200 rows (< 5000)


SIZES = {
    "smoke": _Sizes(pretrain_steps=150, n_ref=2048, n_main=2048, n_other=512, n_zo=256, n_ho=4096,
                    n_ho_fo=2048, tune_steps=6,
                    runs=2, eval_every=3, snapshot_every=3),
    "book": _Sizes(pretrain_steps=1500, n_ref=40_000, n_main=40_000, n_other=8192, n_zo=4096,
                   n_ho=160_000, n_ho_fo=60_000, tune_steps=150, runs=5, eval_every=30, snapshot_every=30),
    "paper": _Sizes(pretrain_steps=4000, n_ref=200_000, n_main=200_000, n_other=40_000, n_zo=16_384,
                    n_ho=640_000, n_ho_fo=240_000, tune_steps=300, runs=10, eval_every=30, snapshot_every=60),
}


def _stats(G: torch.Tensor, ref: torch.Tensor,
           ref_var: torch.Tensor | None = None) -> dict[str, float]:
    """Relative bias, its 3-SE half-width, the cosine between the mean and ``g*`` and the ratio of
    their lengths, and the variance
    of the per-sample estimates ``G`` against
    the per-sample full-backprop gradients ``ref`` (independent draws). ``ref_var`` is
    ``ref.var(0)`` if already computed (it is the same for every estimator)."""
    g_star = ref.mean(0)
    norm = float(g_star.norm())
    mean = G.mean(0)
    var = G.var(0)
    ref_var = ref.var(0) if ref_var is None else ref_var
    diff = float((mean - g_star).norm())
    se = float((var.sum() / len(G) + ref_var.sum() / len(ref)).sqrt())
    cosine = float(mean @ g_star) / max(float(mean.norm()) * norm, 1e-30)
    return {"rel_bias": diff / norm, "half_width": 3 * se / norm, "z": diff / se, "cosine": cosine,
            "rel_norm": float(mean.norm()) / norm, "g_star_norm": norm,
            "rel_var": float(var.sum()) / norm**2, "n": len(G)}


def bias_variance(model: TinyDiffusion, *, n_ref: int, n_main: int, n_other: int, n_zo: int,
                  seed: int = 0, ks: tuple[int, ...] = TRUNC_KS, h: int = 2) -> pd.DataFrame:
    """Experiment A: one row per estimator with its relative bias, the 3-SE half-width of that
    bias, ``z = ||mean - g*|| / SE``, the relative variance ``tr Cov / ||g*||^2`` of one
    trajectory's estimate, the cosine between its mean and ``g*``, and the number of steps whose
    graph it keeps at once.

    ``n_ref``, ``n_main``, ``n_other`` and ``n_zo`` (trajectories) are at least 2, ``seed`` is in
    ``[0, 2**32 - 1]``, each of ``ks`` in ``1..T`` and ``h`` in ``1..T - 1``."""
    if not isinstance(model, TinyDiffusion):
        raise TypeError(f"model must be a TinyDiffusion, got {type(model).__name__}")
    T = model.steps
    # checked here, under the caller's names, before the reference gradient is drawn
    n_ref, n_main, n_other, n_zo = (check_int(name, v, 2) for name, v in (
        ("n_ref", n_ref), ("n_main", n_main), ("n_other", n_other), ("n_zo", n_zo)))
    seed = check_seed(seed)
    ks = tuple(check_int("ks", k, 1, T) for k in ks)
    h = check_int("h", h, 1, T - 1)
    reward = target_reward(GRAD_TARGET)
    gen = torch.Generator().manual_seed(seed)
    ref = estimate_gradient("full_bp", model, reward, n_ref, gen=gen)
    plan: list[tuple[str, str, dict[str, Any], int, int]] = [
        (FULL, "full_bp", {}, n_other, T),
        *[(f"{TRUNC} = {k}", "truncated", {"K": k}, n_other, k) for k in ks],
        (DDPO, "ddpo", {}, n_main, 1),
        (RLR, "rlr", {"h": h}, n_main, h),
        (RLR_ZO, "rlr", {"h": h, "zo": True}, n_zo, h),
        (RLR_CODE, "rlr_code", {"chain_len": 2}, n_other, 1),
    ]
    rows = []
    ref_var = ref.var(0)
    for label, method, kw, n, graph in progress(plan, desc="estimators"):
        G = estimate_gradient(method, model, reward, n, gen=gen, **kw)
        rows.append({"estimator": label, **_stats(G, ref, ref_var), "graph_steps": graph})
        del G
    return pd.DataFrame(rows)


def _chunked(draw: Callable[[int], torch.Tensor], n: int) -> tuple[torch.Tensor, float]:
    """Mean and ``tr Cov`` of ``n`` per-trajectory estimates drawn ``HO_CHUNK`` at a time by
    ``draw(m)`` (shape ``(m, d)``), without holding all of them (pooled over the chunks)."""
    total, sq, done = None, None, 0
    while done < n:
        m = min(HO_CHUNK, n - done)
        G = draw(m).double()
        total = G.sum(0) if total is None else total + G.sum(0)
        sq = (G**2).sum(0) if sq is None else sq + (G**2).sum(0)
        done += m
    assert total is not None and sq is not None
    mean = total / n
    return mean.float(), float(((sq - n * mean**2) / (n - 1)).sum())


def _fo_draw(model: TinyDiffusion, reward: Callable[[torch.Tensor], torch.Tensor], step: int,
             gen: torch.Generator, n: int) -> torch.Tensor:
    return step_terms(model, reward, n, step, gen=gen, parts=("fo",))["fo"]


def ho_credit(model: TinyDiffusion, *, n_ho: int, n_fo: int, seed: int = 0, j: int = HO_J,
              h: int = HO_H, ho_term: Callable[..., torch.Tensor] | None = None) -> dict[str, float]:
    """The half-order check: HO(h) at a fixed start ``j`` (the sub-chain ``x_{j+h} -> x_j``)
    against the summed pathwise credits of steps ``j + 1 .. j + h`` (``rlr-eq-credit``), each
    from its own trajectories (``step_terms``; ``n_ho`` and ``n_fo`` of them).

    Returns the relative bias ``||mean HO - sum c|| / ||sum c||``, ``z = ||mean HO - sum c|| / SE``
    (SE includes the credits' own), the 3-SE half-width relative to ``||sum c||`` and that norm's
    share of ``||g*||``-free scale (``credit_norm``). ``ho_term`` replaces the surrogate (tests).
    """
    reward = target_reward(GRAD_TARGET)
    gen = torch.Generator().manual_seed(seed + 2)
    credit, var = None, 0.0
    for step in range(j + 1, j + h + 1):
        m, v = _chunked(functools.partial(_fo_draw, model, reward, step, gen), n_fo)
        credit = m if credit is None else credit + m
        var += v / n_fo
    assert credit is not None
    ho, v_ho = _chunked(lambda k: step_terms(model, reward, k, j + 1, gen=gen, h=h, parts=("ho",),
                                             ho_term=ho_term)["ho"], n_ho)
    norm = float(credit.norm())
    diff = float((ho - credit).norm())
    se = (var + v_ho / n_ho) ** 0.5
    return {"rel_bias": diff / norm, "z": diff / se, "half_width": 3 * se / norm,
            "credit_norm": norm}


def _step_variance(model: TinyDiffusion, n: int, seed: int) -> tuple[pd.DataFrame, float]:
    """FO and LR variance of the credit of single steps, and the largest relative gap between the
    half-order term with ``h = 1`` and the DDPO term written out (``lr_step_closed_form``)."""
    reward = target_reward(GRAD_TARGET)
    gen = torch.Generator().manual_seed(seed + 1)
    T = model.steps
    rows, gap = [], 0.0
    for step in sorted({1, 2, 5, T // 2, T}):
        terms = step_terms(model, reward, n, step, gen=gen)
        for kind in ("fo", "lr"):
            rows.append({"step": step, "estimator": "FO (pathwise)" if kind == "fo" else "LR (DDPO)",
                         "variance": float(terms[kind].var(0).sum())})
        scale = float(terms["closed_form"].abs().max())
        gap = max(gap, float((terms["ho"] - terms["closed_form"]).abs().max()) / scale)
    return pd.DataFrame(rows), gap


@functools.lru_cache(maxsize=4)
def _pretrained(steps: int, seed: int) -> TinyDiffusion:
    model = TinyDiffusion(seed=seed)
    pretrain(model, steps=steps, seed=seed)
    return model


def _finetune_all(model: TinyDiffusion, reward: Callable[[torch.Tensor], torch.Tensor],
                  size: _Sizes, seed: int
                  ) -> tuple[list[pd.DataFrame], list[Any], list[pd.DataFrame], list[pd.DataFrame]]:
    """Experiment B for ``model``'s adapter: every method of ``TUNED`` picks its rate from
    ``LR_GRID`` (``core.tuning.tune`` on ``tuning_seeds(seed, 1)``; RLR with ZO once per ZO scale
    of ``S_GRID``, keeping the best (s, rate) pair), then runs ``size.runs`` seeds from ``seed``.
    Returns the tuning scores, the tuning records (each labelled with the method and,
    for the per-step adapter, ``PER_STEP``), the logs and the sample clouds of the first seed."""
    tuning, tuned, logs, clouds = [], [], [], []
    suffix = PER_STEP if model.adapter == "per_step" else ""
    snaps = tuple(range(0, size.tune_steps + 1, size.snapshot_every))
    tune_seed = tuning_seeds(seed, 1)[0]
    for label, (method, kw0) in progress(TUNED.items(), desc=f"fine-tuning{suffix}"):
        # RLR with ZO tunes its ZO scale s too: every s of S_GRID gets the rate grid
        scales = S_GRID if kw0.get("zo") else (None,)
        picks = []
        for zs in scales:
            kw = kw0 if zs is None else {**kw0, "zo_scale": zs}

            def score(grid: Sequence[float], method: str = method, kw: dict[str, Any] = kw,
                      label: str = label, zs: float | None = zs) -> list[float]:
                log, _ = finetune(method, model, reward, steps=size.tune_steps, lr=list(grid),
                                  seed=tune_seed, target=TUNE_TARGET, eval_every=size.tune_steps,
                                  **kw)
                final = log[log.step == size.tune_steps]
                tuning.append(final.assign(method=label, s=np.nan if zs is None else zs)[
                    ["method", "s", "lr", "fraction"]])
                return [-float(v) for v in final.fraction]

            name = label + suffix + ("" if zs is None else f", s = {zs:g}")
            choice = tune(name, score, LR_GRID[len(LR_GRID) // 2], grid=LR_GRID)
            tuned.append(choice)
            finite = [v for v in choice.scores if np.isfinite(v)]
            picks.append((min(finite) if finite else np.inf, zs, kw, float(choice.choice)))
        # the best (s, rate) pair on the tuning seed (the first s on a tie)
        _, zs, kw, best = min(picks, key=lambda p: p[0])
        log, cl = finetune(method, model, reward, steps=size.tune_steps, lr=best, runs=size.runs,
                           seed=seed, target=TUNE_TARGET, eval_every=size.eval_every,
                           snapshots=snaps, **kw)
        logs.append(log.assign(method=label, seed=seed + log.run, s=np.nan if zs is None else zs))
        for k, pts in cl.items():
            clouds.append(pd.DataFrame({"method": label, "step": k, "x": pts[:, 0], "y": pts[:, 1]}))
    return tuning, tuned, logs, clouds


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Run Experiments A and B at ``scale`` and return the report.

    Experiment A uses one pretrained model (seed ``seed``); Experiment B runs seeds
    ``seed, ..., seed + runs - 1`` side by side after picking each method's learning rate from
    ``LR_GRID`` with ``core.tuning.tune`` on ``tuning_seeds(seed, 1)`` (``seed + 10000``).
    """
    size = pick(SIZES, scale)
    seed = check_int("seed", seed, 0, 2**31)
    seed_everything(seed)
    with timed() as clock:
        model = TinyDiffusion(seed=seed)
        losses = pretrain(model, steps=size.pretrain_steps, seed=seed)
        est = bias_variance(model, n_ref=size.n_ref, n_main=size.n_main, n_other=size.n_other,
                            n_zo=size.n_zo, seed=seed)
        steps_df, h1_gap = _step_variance(model, size.n_other, seed)
        ho = ho_credit(model, n_ho=size.n_ho, n_fo=size.n_ho_fo, seed=seed)
        # Experiment B: the per-step adapter on the pretrained trunk. The shared adapter's run
        # (``_finetune_all(model, ...)``) is not repeated here, for the CPU budget: its results
        # are the stored "before" of ``shared_before``
        tuning, tuned, logs, clouds = _finetune_all(model.with_adapter("per_step"),
                                                    target_reward(TUNE_TARGET), size, seed)
    tables = {
        "estimators": est,
        "step_variance": steps_df,
        "ho_check": pd.DataFrame([{"j": HO_J, "h": HO_H, **ho}]),
        "tuning": pd.concat(tuning, ignore_index=True),
        "finetune": pd.concat(logs, ignore_index=True)[["method", "seed", "s", "lr", "step",
                                                         "reward", "fraction"]],
        "clouds": pd.concat(clouds, ignore_index=True),
        "pretrain": pd.DataFrame({"step": np.arange(len(losses)), "loss": losses}).iloc[::25],
    }
    return Report("rlr", scale, seed, tables, _claims(tables, h1_gap, size), seconds=clock(),
                  chart_builder=charts, tuning=tuned)


def _rows(df: pd.DataFrame, key: str) -> dict[str, dict[str, Any]]:
    """``{df[key]: {column: value}}``: one dict per row of a table with unique ``key`` values."""
    return {str(k): {str(c): x for c, x in v.items()}
            for k, v in df.set_index(key).to_dict("index").items()}


def _finetune_claims(prefix: str, adapter: str, fin: pd.DataFrame, steps: int, regime: str,
                     expected: tuple[bool, bool]) -> list[Claim]:
    """The two fine-tuning claims of one adapter (``fin``: final fractions, seeds x methods): RLR
    with ZO against DDPO (control: RLR, LR in place of ZO) and against truncated K = 1 (control:
    DDPO), judged on the paired per-seed differences; ``expected`` for the two, in that order."""
    zo = ", each ZO step perturbing its own 2 parameters" if adapter == "per-step" else ""
    return [
        Claim.paired(
            f"finetune_{prefix}rlr_vs_ddpo",
            f"With the {adapter} adapter, after {steps} fine-tuning steps RLR as the paper defines "
            f"it (FO last step, HO(2), ZO elsewhere{zo}) puts more samples in the target region "
            "than DDPO: the paired per-seed difference RLR - DDPO is above 0, its 95% t interval "
            "included; every method's Adam rate from the same 5-point grid 0.003-0.3 on a tuning "
            "seed (core.tuning), RLR with ZO's jointly with its ZO scale s in 0.05, 0.3, 1.0 "
            "(a grid chosen after a reviewer's probe)",
            list(fin[RLR_ZO]), list(fin[DDPO]), 0.0, ">",
            "Table 2: RLR above DDPO on every reward (e.g. aesthetic 6.65 vs 5.52)",
            expected=expected[0], kind="paper", source="pilot",
            control=f"{RLR}, tuned on the same grid", control_values=list(fin[RLR]),
            regime=regime),
        Claim.paired(
            f"finetune_{prefix}rlr_vs_trunc1",
            f"With the {adapter} adapter, after {steps} steps RLR as the paper defines it puts more "
            "samples in the target region than truncated backprop with K = 1: paired difference "
            "> 0, its 95% t interval included; same tuning",
            list(fin[RLR_ZO]), list(fin[TRUNC1]), 0.0, ">",
            "Table 5: full RLR above 'w/o HO & ZO' (one-step truncated backprop), e.g. "
            "aesthetic 6.65 vs 5.78",
            expected=expected[1], kind="paper", source="pilot",
            control=f"{DDPO}, tuned on the same grid", control_values=list(fin[DDPO]),
            regime=regime),
    ]


def _claims(t: dict[str, pd.DataFrame], h1_gap: float, size: _Sizes) -> list[Claim]:
    est = _rows(t["estimators"], "estimator")
    ho = t["ho_check"].iloc[0]
    sv = t["step_variance"]
    last = _rows(sv[sv.step == 1], "estimator")
    fin = t["finetune"]
    fin = fin[fin.step == fin.step.max()].pivot(index="seed", columns="method", values="fraction")
    biases = [float(est[f"{TRUNC} = {k}"]["rel_bias"]) for k in TRUNC_KS]
    steps_up = max(b - a for a, b in zip(biases, biases[1:], strict=False))
    return [
        Claim(
            "variance_rlr_vs_ddpo",
            "RLR as the paper defines it (FO on the last step, HO(2) on a random sub-chain, ZO on every "
            "other step) has a smaller per-trajectory variance than DDPO's likelihood ratio: "
            "tr Cov(RLR) / tr Cov(DDPO) < 1 (Experiment A, one seed)",
            float(est[RLR_ZO]["rel_var"] / est[DDPO]["rel_var"]), 1.0, "<",
            paper="RLR has lower variance than RL (DDPO); stated in words, no number in the sources read",
            expected=False, kind="paper", source="paper",
            control=RLR,
            control_measured=float(est[RLR]["rel_var"] / est[DDPO]["rel_var"]),
            regime="chapter's: the 2-D DDPM at its pretrained model, one seed, 4,096 (ZO) and 40,000 "
                   "(DDPO, no-ZO) trajectories; the paper's (Stable Diffusion) is not run"),
        # The shared adapter's pair (finetune_rlr_vs_ddpo / _vs_trunc1, both not expected, both
        # failing at every block) is no longer run: see ``shared_before``.
        # The per-step pair (issue 23): the same protocol, grid, seeds, horizon, target and metric
        # as the shared pair; thresholds and expectations set before any judging run. The spec's
        # probe of this adapter (batch 128, lr 0.05) ended truncated K = 1 at 0.24 and DDPO at
        # 0.89 of the samples in the target, the code recipe (FO + LR) at 0.80: the last step
        # alone moves a sample by at most 0.3 per coordinate, so truncation cannot re-route the
        # other modes, while any estimator that credits the early steps can. Hence RLR (with ZO)
        # above truncated K = 1 is expected. Against DDPO it is not: the probe had DDPO at or
        # above RLR's code recipe, and RLR's ZO terms, although they perturb only the 2 numbers
        # of their own step here (not 130), still have a per-step variance of order
        # 2 E[(R - b)^2] / s^2 at s = 0.05, larger than a likelihood ratio's.
        *_finetune_claims("perstep_", "per-step", fin, size.tune_steps, REGIME_PERSTEP,
                          (False, True)),
        Claim("unbiased_ddpo",
              "DDPO's mean gradient is within 3 standard errors of the exact gradient g*: "
              "||mean - g*|| / SE <= 3 (SE includes g*'s own)",
              float(est[DDPO]["z"]), 3.0, "<=",
              paper="the likelihood-ratio (DDPO) gradient is unbiased; stated, no number",
              kind="theorem", source="prior"),
        Claim("unbiased_rlr",
              "RLR with likelihood ratios in place of ZO (FO + HO(2) + LR elsewhere) is within 3 "
              "standard errors of g*: "
              "||mean - g*|| / SE <= 3",
              float(est[RLR]["z"]), 3.0, "<=",
              paper="RLR's gradient estimator is unbiased (abstract); stated, no number",
              kind="theorem", source="prior"),
        Claim("unbiased_resolution",
              "the unbiasedness test has teeth: its 3-SE half-width is at most 0.1 ||g*|| for DDPO "
              "and RLR (the larger of the two)",
              float(max(est[DDPO]["half_width"], est[RLR]["half_width"])), 0.1, "<=",
              paper="no counterpart: this checks the power of the unbiasedness test",
              kind="theorem", source="prior"),
        Claim("unbiased_ho",
              f"the half-order term HO({HO_H}) at the fixed start j = {HO_J} is unbiased for the summed "
              f"first-order credits of steps {HO_J + 1}..{HO_J + HO_H}: "
              "||mean HO - sum c|| / SE <= 3 (SE includes the credits' own)",
              float(ho["z"]), 3.0, "<=",
              paper="the half-order estimator is unbiased (the sub-chain's likelihood ratio with its "
                    "inner noises fixed); stated, no number",
              kind="theorem", source="prior"),
        Claim("ho_resolution",
              "the half-order check has teeth: its 3-SE half-width is at most 0.1 of the norm of the "
              "summed credit it tests",
              float(ho["half_width"]), 0.1, "<=",
              paper="no counterpart: this checks the power of the half-order test (a whole-gradient "
                    "test cannot see the sub-chain, which carries a small share of g*)",
              kind="theorem", source="prior"),
        Claim("truncation_bias",
              "truncated backprop through the last step only (K = 1) is biased: relative bias >= 0.5",
              biases[0], 0.5, ">=",
              paper="truncated backprop gives biased gradient estimates (abstract); no number",
              kind="theorem", source="pilot"),
        Claim("truncation_decreasing",
              "the relative bias of truncated backprop decreases with K = 1, 2, 5, 10: the largest "
              "increase between consecutive K is < 0",
              steps_up, 0.0, "<",
              paper="the bias is the credit of the dropped early steps (stated in words)",
              kind="theorem", source="pilot"),
        Claim("last_step_fo",
              "on the last step the pathwise (FO) estimate has at most 0.01 times the variance of "
              "the likelihood ratio",
              float(last["FO (pathwise)"]["variance"] / last["LR (DDPO)"]["variance"]), 0.01, "<=",
              paper="RLR differentiates the last step directly (FO has the lowest variance, FO < HO < ZO)",
              kind="theorem", source="prior"),
        Claim("variance_rlr_nozo",
              "RLR with likelihood ratios in place of ZO has a smaller variance than DDPO (its last "
              "step is pathwise): tr Cov(RLR, LR for ZO) / tr Cov(DDPO) < 1",
              float(est[RLR]["rel_var"] / est[DDPO]["rel_var"]), 1.0, "<",
              paper="not the paper's 'w/o ZO' ablation of Table 5 (which drops the ZO terms and is "
                    "biased; not run here); no counterpart",
              expected=False, kind="derivation", source="prior"),
        Claim("h1_is_ddpo",
              "the half-order term with h = 1 equals the DDPO term written out in closed form, sample "
              "by sample: largest relative gap <= 1e-5",
              h1_gap, 1e-5, "<=",
              paper="RL (DDPO) is the h = 1 special case of the half-order estimator",
              kind="sanity", source="prior"),
    ]


def numbers(report: Report) -> dict[str, float]:
    """Numbers the chapter's prose quotes that are not a claim's value, from ``report.tables``
    (medians over seeds where there are seeds), the shared adapter's stored run (``before_*``,
    from ``shared_before``) and the stability table (``stab_*``)."""
    t = report.tables
    est = _rows(t["estimators"], "estimator")
    sv = t["step_variance"].set_index(["step", "estimator"]).variance
    out: dict[str, float] = {
        "zo_half_width": float(est[RLR_ZO]["half_width"]),
        "zo_rel_var": float(est[RLR_ZO]["rel_var"]),
        "zo_bias": float(est[RLR_ZO]["rel_bias"]),
        "ddpo_rel_var": float(est[DDPO]["rel_var"]),
        "rlr_rel_var": float(est[RLR]["rel_var"]),
        "full_rel_var": float(est[FULL]["rel_var"]),
        "code_rel_var": float(est[RLR_CODE]["rel_var"]),
        "code_z": float(est[RLR_CODE]["z"]),
        "code_half_width": float(est[RLR_CODE]["half_width"]),
        "ddpo_bias": float(est[DDPO]["rel_bias"]),
        "rlr_bias": float(est[RLR]["rel_bias"]),
        "full_z": float(est[FULL]["z"]),
        "full_half_width": float(est[FULL]["half_width"]),
        "ddpo_half_width": float(est[DDPO]["half_width"]),
        "rlr_half_width": float(est[RLR]["half_width"]),
        "fo_last_var": float(sv[(1, "FO (pathwise)")]),
        "lr_last_var": float(sv[(1, "LR (DDPO)")]),
        "n_main": float(est[DDPO]["n"]),
        # the last step's LR variance as a share of DDPO's total per-trajectory variance
        "last_share": float(sv[(1, "LR (DDPO)")]) / (float(est[DDPO]["rel_var"])
                                                     * float(est[DDPO]["g_star_norm"]) ** 2),
    }
    for K in TRUNC_KS:
        for col, key in (("rel_bias", "bias"), ("cosine", "cos"), ("rel_norm", "len")):
            out[f"trunc{K}_{key}"] = float(est[f"{TRUNC} = {K}"][col])
    # the angle between truncated K = 1's mean and g*, in degrees
    out["trunc1_angle"] = float(np.degrees(np.arccos(np.clip(out["trunc1_cos"], -1.0, 1.0))))
    out.update(_finetune_numbers(t["finetune"], t["tuning"]))
    for claim in report.claims:  # the paired controls' intervals (glue_report has their medians)
        if claim.name.startswith("finetune_") and claim.control_interval is not None:
            lo, hi = claim.control_interval
            out[f"{claim.name}_ctrl_lo"], out[f"{claim.name}_ctrl_hi"] = float(lo), float(hi)
    out["per_step_bound"] = PER_STEP_BOUND
    out.update({f"pre_s_{k}": v for k, v in BEFORE_S_TUNING.items()})  # before s was tuned
    out["s_grid_max"] = float(max(S_GRID))  # the s grid is not extended past an edge
    out["per_step_d"] = float(2 * TinyDiffusion().steps)
    # the shared adapter's stored run (the "before"): its numbers under the prefix before_
    from iclr_lab.generative.rlr import shared_before

    fin = pd.DataFrame(shared_before.FINETUNE, columns=["method", "seed", "lr", "step", "fraction",
                                                        "reward"])
    tun = pd.DataFrame(shared_before.TUNING, columns=["method", "lr", "fraction"])
    prev = _finetune_numbers(fin, tun)
    out.update({f"before_{k}": v for k, v in prev.items()})
    for name, c in shared_before.CLAIMS.items():
        key = name.removeprefix("finetune_")
        out[f"before_{key}"] = float(c["measured"])
        out[f"before_{key}_lo"], out[f"before_{key}_hi"] = map(float, c["interval"])
        out[f"before_{key}_ctrl"] = float(c["control_measured"])
        out[f"before_{key}_ctrl_lo"], out[f"before_{key}_ctrl_hi"] = map(float, c["control_interval"])
        out[f"before_{key}_k"] = float(sum(b[2] for b in c["blocks"]))
        out[f"before_{key}_ctrl_k"] = float(sum(b[4] for b in c["blocks"]))
        for i, part in ((1, ""), (3, "_ctrl")):  # the spread over the stability blocks
            out[f"before_{key}{part}_blocks_lo"] = float(min(b[i] for b in c["blocks"]))
            out[f"before_{key}{part}_blocks_hi"] = float(max(b[i] for b in c["blocks"]))
    out.update(_stability_numbers())
    return out


def _finetune_numbers(fin: pd.DataFrame, tun: pd.DataFrame) -> dict[str, float]:
    """Experiment B's numbers from its log ``fin`` and tuning scores ``tun``: each method's final
    fraction (median, min, max over seeds), its rate (the judging runs'), that rate's score and
    the grid's lowest score on the tuning seed, RLR with ZO's paired differences and the spread
    of the three methods without ZO."""
    last = fin[fin.step == fin.step.max()]
    pair = last.pivot(index="seed", columns="method", values="fraction")
    out: dict[str, float] = {"frac_start": float(fin[fin.step == 0].fraction.median()),
                             "n_runs": float(len(pair))}
    for m, k in {TRUNC1: "trunc1", DDPO: "ddpo", RLR: "rlr", RLR_ZO: "rlr_zo"}.items():
        out[f"frac_{k}"] = float(pair[m].median())
        out[f"frac_{k}_lo"] = float(pair[m].min())
        out[f"frac_{k}_hi"] = float(pair[m].max())
        g = tun[tun.method == m]
        lr = float(last[last.method == m].lr.iloc[0])  # the rate the judging runs used
        if m == RLR_ZO and "s" in tun.columns and "s" in last.columns:  # its chosen ZO scale
            zs = float(last[last.method == m].s.iloc[0])
            out["s_rlr_zo"] = zs
            for v in sorted(set(tun[tun.method == m].s)):  # each scale's best tuning score
                out[f"tune_rlr_zo_s{round(100 * v)}_best"] = float(g[np.isclose(g.s, v)].fraction.max())
            g = g[np.isclose(g.s, zs)]
        out[f"lr_{k}"] = lr
        out[f"tune_{k}_best"] = float(g[np.isclose(g.lr, lr)].fraction.iloc[0])
        out[f"tune_{k}_min"] = float(g.fraction.min())
        # the grid's second-best score (is the chosen rate one peak, or a plateau?)
        out[f"tune_{k}_second"] = float(g.fraction.sort_values().iloc[-2]) if len(g) > 1 else float("nan")
    for m, k in ((DDPO, "ddpo"), (TRUNC1, "trunc1")):
        diff = pair[RLR_ZO] - pair[m]
        out[f"rlr_below_{k}"] = float((diff < 0).sum())
        out[f"rlr_minus_{k}_lo"] = float(diff.min())
        out[f"rlr_minus_{k}_hi"] = float(diff.max())
    # the spread of the methods without ZO terms (min and max over their seeds)
    out["frac_nozo_lo"] = float(pair[[TRUNC1, DDPO, RLR]].min().min())
    out["frac_nozo_hi"] = float(pair[[TRUNC1, DDPO, RLR]].max().max())
    out["frac_rlr_zo_first"] = float(pair[RLR_ZO].loc[pair.index.min()])
    # the first evaluation after step 0 (its step, and each method's median there): how fast the
    # methods get there, which the final fraction does not show
    first = int(fin[fin.step > 0].step.min())
    out["eval_first_step"] = float(first)
    early = fin[fin.step == first].groupby("method").fraction.median()
    for m, k in {TRUNC1: "trunc1", DDPO: "ddpo", RLR: "rlr", RLR_ZO: "rlr_zo"}.items():
        out[f"frac_{k}_early"] = float(early[m])
    return out


def _stability_numbers() -> dict[str, float]:
    """Spreads over the seed blocks of the shipped stability table (``iclr_lab/stability/rlr.json``)
    that the chapter quotes; empty when the table is missing."""
    from iclr_lab.core.stability import load

    table = load("rlr")
    if table is None:
        return {}
    c = table["claims"]

    def vals(name: str, key: str = "measured") -> list[float]:
        return [float(e[key]) for e in c[name] if e[key] is not None]

    out: dict[str, float] = {"stab_blocks": float(table["blocks"])}
    for key, name, field in (("nozo", "variance_rlr_nozo", "measured"),
                             ("unb_res", "unbiased_resolution", "measured"),
                             ("ho_res", "ho_resolution", "measured"),
                             ("ps_ddpo", "finetune_perstep_rlr_vs_ddpo", "measured"),
                             ("ps_ctrl_ddpo", "finetune_perstep_rlr_vs_ddpo", "control_measured"),
                             ("ps_trunc", "finetune_perstep_rlr_vs_trunc1", "measured"),
                             ("ps_ctrl_trunc", "finetune_perstep_rlr_vs_trunc1", "control_measured")):
        if name not in c:  # a table made before the claim existed
            continue
        v = vals(name, field)
        out[f"stab_{key}_lo"], out[f"stab_{key}_hi"] = min(v), max(v)
    out["stab_nozo_below"] = float(sum(v < 1 for v in vals("variance_rlr_nozo")))
    for key, name in (("ps_ddpo", "finetune_perstep_rlr_vs_ddpo"),
                      ("ps_trunc", "finetune_perstep_rlr_vs_trunc1")):
        if name not in c:
            continue
        ctrl = vals(name, "control_measured")
        # blocks where the control's interval clears zero, its median is above zero, its mean
        out[f"stab_{key}_ctrl_pass"] = float(sum(bool(e["control_passed"]) for e in c[name]))
        out[f"stab_{key}_ctrl_pos"] = float(sum(v > 0 for v in ctrl))
        out[f"stab_{key}_ctrl_mean"] = float(np.mean(ctrl))
        out[f"stab_{key}_pass"] = float(sum(bool(e["passed"]) for e in c[name]))
    return out


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """The chapter's charts: ``bias_variance`` (Experiment A), ``step_variance`` (FO against LR per
    step), ``finetune`` (Experiment B, medians over seeds: the per-step adapter's run beside the
    shared adapter's stored one) and ``cloud_slider`` (the samples moving
    during fine-tuning, with a slider over steps that works on the static page)."""
    import altair as alt

    from iclr_lab.core.charts import curves, palette

    t = report.tables
    est = t["estimators"].assign(lo=lambda d: (d.rel_bias - d.half_width).clip(lower=0),
                                 hi=lambda d: (d.rel_bias + d.half_width).clip(upper=Y_CAP))
    scale = palette([n for n in COLORS if n in set(est.estimator)], colors=COLORS)
    # padded domains, so that no point sits on the frame
    x = alt.X("rel_var:Q", scale=alt.Scale(type="log", nice=False,
                                           domain=[float(est.rel_var.min()) / 3,
                                                   float(est.rel_var.max()) * 3]),
              title="relative variance of one trajectory, tr Cov / ‖g*‖²")
    y = alt.Y("rel_bias:Q", title="relative bias ‖mean − g*‖ / ‖g*‖",
              scale=alt.Scale(domain=[-0.05, Y_CAP], clamp=True))
    # DDPO and RLR with LR in place of ZO nearly coincide: DDPO gets a larger diamond under
    # RLR's circle, so that both stay visible
    names = scale.domain
    shape = alt.Shape("estimator:N", title="estimator", scale=alt.Scale(
        domain=names, range=["diamond" if n == DDPO else "circle" for n in names]))
    pts = alt.Chart(est).mark_point(filled=True, opacity=0.9).encode(
        x=x, y=y, color=alt.Color("estimator:N", scale=scale, title="estimator"), shape=shape,
        size=alt.condition(alt.datum.estimator == DDPO, alt.value(260), alt.value(90)),
        order=alt.condition(alt.datum.estimator == DDPO, alt.value(0), alt.value(1)),
        tooltip=["estimator", alt.Tooltip("rel_bias:Q", format=".3f"),
                 alt.Tooltip("half_width:Q", format=".3f"), alt.Tooltip("rel_var:Q", format=".3g"),
                 alt.Tooltip("cosine:Q", format=".3f"), "n"])
    bars = alt.Chart(est).mark_rule(strokeWidth=2).encode(
        x=x, y=alt.Y("lo:Q", scale=alt.Scale(domain=[-0.05, Y_CAP])), y2="hi:Q",
        color=alt.Color("estimator:N", scale=scale, title="estimator"))
    bias_variance_chart = alt.layer(pts, bars).properties(
        width=440, height=260,
        title=f"Bias against variance at the pretrained model (bars: ±3 SE; axis cut at {Y_CAP:g})")

    sv = t["step_variance"]
    # only the steps in the table are measured: points mark them, the lines only join them;
    # padded domains keep the end points off the frame
    step_chart = alt.Chart(sv).mark_line(point=alt.OverlayMarkDef(size=60, filled=True)).encode(
        x=alt.X("step:Q", title="denoising step t (t = 1 is the last; points: measured steps)",
                scale=alt.Scale(domain=[0, int(sv.step.max()) + 1], nice=False)),
        y=alt.Y("variance:Q", scale=alt.Scale(type="log", nice=False,
                                              domain=[float(sv.variance.min()) / 2,
                                                      float(sv.variance.max()) * 2]),
                title="variance of one trajectory's estimate"),
        color=alt.Color("estimator:N", title="credit of step t by",
                        scale=alt.Scale(domain=["FO (pathwise)", "LR (DDPO)"],
                                        range=["#d62728", "#4c78a8"])),
        tooltip=["step", "estimator", alt.Tooltip("variance:Q", format=".3g")],
    ).properties(width=440, height=260, title="Per-step variance: pathwise against likelihood ratio")

    from iclr_lab.generative.rlr import shared_before

    before = pd.DataFrame(shared_before.FINETUNE, columns=["method", "seed", "lr", "step",
                                                           "fraction", "reward"])
    panels = []
    for fin, name in ((t["finetune"], "per-step adapter (this run)"),
                      (before, "shared adapter (stored run before the per-step adapter, seeds 0–4)")):
        panel = curves(fin, x="step", y="fraction", color="method", center="median",
                       highlight=RLR, colors=COLORS, x_title="fine-tuning step",
                       y_title="fraction of samples in the target mode", color_title="method",
                       title=name)
        # DDPO's median runs under RLR's thick line: redraw it dashed on top
        ddpo_med = fin[fin.method == DDPO].groupby("step", as_index=False).fraction.median()
        dashed = alt.Chart(ddpo_med).mark_line(strokeDash=[6, 4], strokeWidth=2,
                                               color=COLORS[DDPO]).encode(x="step:Q", y="fraction:Q")
        panel.layer = [*panel.layer, dashed]
        panels.append(panel.properties(width=440, height=220))
    first, last = report.seed, report.seed + int(t["finetune"].seed.nunique()) - 1
    finetune_chart = alt.vconcat(*panels).resolve_scale(y="shared").properties(
        title=f"Fine-tuning towards one mode (median over seeds {first}–{last}, band min-max)")

    cl = t["clouds"]
    steps = sorted(cl.step.unique())
    slider = alt.param(name="cloud_step", value=int(steps[-1]), bind=alt.binding_range(
        min=int(steps[0]), max=int(steps[-1]), step=int(steps[1] - steps[0]) if len(steps) > 1 else 1,
        name="fine-tuning step "))
    # the target region, a circle of radius 1 drawn in data coordinates
    angle = np.linspace(0, 2 * np.pi, 61)
    target = pd.DataFrame({"x": TUNE_TARGET[0] + np.cos(angle), "y": TUNE_TARGET[1] + np.sin(angle),
                           "order": np.arange(61)})
    base = alt.Chart().mark_circle(size=14, opacity=0.6).encode(
        x=alt.X("x:Q", scale=alt.Scale(domain=[-4, 4]), title="x₁"),
        y=alt.Y("y:Q", scale=alt.Scale(domain=[-4, 4]), title="x₂"),
        color=alt.Color("method:N", scale=palette(list(TUNED), colors=COLORS), legend=None),
    ).transform_filter(alt.datum.step == slider)
    ring = alt.Chart(target).mark_line(color="black", strokeDash=[4, 3]).encode(
        x="x:Q", y="y:Q", order="order:Q")
    cloud_chart = alt.layer(base, ring).properties(width=190, height=190).facet(
        facet=alt.Facet("method:N", title=None, sort=list(TUNED)), columns=2,
        data=cl).add_params(slider).properties(
        title="Samples of the first seed during fine-tuning with the per-step adapter (dashed "
              "circle: the target region)")
    return {"bias_variance": bias_variance_chart, "step_variance": step_chart,
            "finetune": finetune_chart, "cloud_slider": cloud_chart}


# -- the live explorer ----------------------------------------------------------------------------

EXPLORER_PRETRAIN = 600
EXPLORER_SAMPLES = 2048


def explorer_chart(h: int = 2, K: int = 1, n_samples: int = EXPLORER_SAMPLES) -> alt.TopLevelMixin:
    """Relative bias (±3 SE) and relative variance of DDPO, RLR with LR in place of ZO with
    sub-chain length ``h`` and truncated backprop through ``K`` steps (``rlr-eq-rlr``, ``rlr-eq-trunc``), at a
    small pretrained model (cached), against ``n_samples`` full-backprop gradients. ``h`` is in
    ``1..T - 1`` and ``K`` in ``1..T`` (``T = 20``), ``n_samples`` at least 2."""
    import altair as alt

    from iclr_lab.core.charts import palette

    # checked before the model is pretrained (seconds, on the first call); an untrained model of
    # the same configuration gives the number of steps
    T = TinyDiffusion().steps
    h = check_int("h", h, 1, T - 1)
    K = check_int("K", K, 1, T)
    n = check_int("n_samples", n_samples, 2)
    model = _pretrained(EXPLORER_PRETRAIN, 0)
    reward = target_reward(GRAD_TARGET)
    gen = torch.Generator().manual_seed(0)
    ref = estimate_gradient("full_bp", model, reward, n, gen=gen)
    rows = []
    ref_var = ref.var(0)
    plan: list[tuple[str, str, dict[str, Any]]] = [
        (DDPO, "ddpo", {}), (f"RLR, LR in place of ZO (h = {h})", "rlr", {"h": h}),
        (f"{TRUNC} = {K}", "truncated", {"K": K})]
    for label, method, kw in plan:
        s = _stats(estimate_gradient(method, model, reward, n, gen=gen, **kw), ref, ref_var)
        rows.append({"estimator": label, **s})
    df = pd.DataFrame(rows).assign(lo=lambda d: (d.rel_bias - d.half_width).clip(lower=0),
                                   hi=lambda d: d.rel_bias + d.half_width)
    colors = {DDPO: COLORS[DDPO], df.estimator[1]: COLORS[RLR], df.estimator[2]: COLORS[TRUNC1]}
    scale = palette(list(colors), colors=colors)
    enc = {"y": alt.Y("estimator:N", title=None, sort=list(colors)),
           "color": alt.Color("estimator:N", scale=scale, legend=None)}
    bias = alt.layer(
        alt.Chart(df).mark_bar().encode(x=alt.X("rel_bias:Q", title="relative bias (rule: ±3 SE)"),
                                        **enc),
        alt.Chart(df).mark_rule(color="black").encode(x="lo:Q", x2="hi:Q", y=enc["y"]),
    ).properties(width=200, height=120)
    # points, not bars: a bar on a log axis has no zero to start from
    var = alt.Chart(df).mark_point(filled=True, size=120).encode(
        x=alt.X("rel_var:Q", scale=alt.Scale(type="log"), title="relative variance (log)"),
        **enc, tooltip=["estimator", alt.Tooltip("rel_var:Q", format=".3g")]).properties(
        width=200, height=120)
    return alt.hconcat(bias, var).properties(
        title=f"h = {h}, K = {K}: bias and variance at the pretrained model ({n} trajectories)")


def explorer() -> Any:
    """Live explorer: move ``h`` (RLR's sub-chain) and ``K`` (truncation) and see each estimator's
    bias and variance (:func:`explorer_chart`)."""
    from ipywidgets import IntSlider

    from iclr_lab.core.widgets import explorer as make

    T = TinyDiffusion().steps
    style = {"description_width": "initial"}
    return make(explorer_chart,
                h=IntSlider(value=2, min=1, max=T - 1, description="RLR sub-chain h",
                            continuous_update=False, style=style),
                K=IntSlider(value=1, min=1, max=T, description="truncation K",
                            continuous_update=False, style=style),
                n_samples=IntSlider(value=EXPLORER_SAMPLES, min=256, max=8192, step=256,
                                    description="trajectories", continuous_update=False, style=style))


