"""The DNT chapter's experiment: ``reproduce()``, its claims, the numbers of its prose and its charts.

A tiny GPT is trained on a seeded Zipf language (:class:`iclr_lab.core.languages.ZipfLanguage`) in
the 2 x 2 grid {standard pre-norm, DNT} x {AdamW, mSGDW}, plus the strongest mSGDW baseline on the
standard model: mSGDW with the global gradient norm clipped at 1.0, as nanoGPT trains. Every cell
tunes its peak learning rate on its own grid of three values with :func:`iclr_lab.core.tuning.tune`
on a tuning seed, then trains at its choice on three judging seeds; the leave-one-out ablation of
DNT (:data:`ABLATIONS`: each placement removed in turn) trains with mSGDW at DNT + mSGDW's tuned
rate on the same seeds, and each ablated network is the control of the claim about its placement.
At step ``stats_step`` of AdamW at ``STATS_LR`` the gradients of both models are measured on a fixed
probe batch (:func:`~iclr_lab.optimizers.dnt.model.heavy_tail_stats`). The runs train in stacks of
at most ``_STACK`` models (:func:`~iclr_lab.optimizers.dnt.stacked.train_many`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from iclr_lab.core.languages import ZipfLanguage
from iclr_lab.core.report import Claim, Report, timed
from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.optimizers.dnt.model import PLACEMENTS, GPTConfig, Placement
from iclr_lab.optimizers.dnt.theory import jacobian_explorer_chart, midnorm_invariance

if TYPE_CHECKING:
    import altair as alt

    from iclr_lab.core.tuning import Tuned
    from iclr_lab.core.widgets import Explorer

__all__ = ["ABLATIONS", "CELLS", "GRIDS", "STATS_LR", "Cell", "ablation_label", "charts", "explorer",
           "numbers", "reproduce"]

STANDARD, DNT = "standard", "DNT"


@dataclass(frozen=True)
class Cell:
    """One cell of the experiment: an architecture, an optimizer and, for the strongest mSGDW
    baseline, a gradient-clipping threshold."""

    arch: str
    optimizer: str
    clip: float | None = None

    @property
    def label(self) -> str:
        """The cell's name in tables and legends, e.g. ``"DNT + mSGDW"``."""
        return f"{self.arch} + {self.optimizer}" + (f", clip {self.clip:g}" if self.clip else "")

    @property
    def norm(self) -> str:
        """The :class:`~iclr_lab.optimizers.dnt.model.TinyGPT` placement: ``"pre"`` or ``"dnt"``."""
        return "dnt" if self.arch == DNT else "pre"

    @property
    def opt(self) -> str:
        """The optimizer name of :func:`~iclr_lab.optimizers.dnt.training.train_lm`."""
        return self.optimizer.lower()


#: The paper's 2 x 2 grid of cells, then the clipped baseline (five cells in all).
CELLS: tuple[Cell, ...] = (
    Cell(STANDARD, "AdamW"), Cell(STANDARD, "mSGDW"), Cell(DNT, "AdamW"), Cell(DNT, "mSGDW"),
    Cell(STANDARD, "mSGDW", clip=1.0),
)
STD_ADAMW, STD_MSGDW, DNT_ADAMW, DNT_MSGDW, STD_CLIP = (c.label for c in CELLS)
#: The three peak learning rates of each cell (the same budget for every cell), spaced by about
#: half a decade and centred on the best rate of a pilot sweep on seeds 0 and 1 (see the chapter).
GRIDS: dict[str, tuple[float, float, float]] = {
    STD_ADAMW: (3e-3, 1e-2, 3e-2),
    STD_MSGDW: (0.025, 0.08, 0.25),
    DNT_ADAMW: (1.5e-2, 5e-2, 0.15),
    DNT_MSGDW: (0.2, 0.6, 2.0),
    STD_CLIP: (0.08, 0.25, 0.8),
}
#: The gradient statistics are measured for AdamW at this learning rate, for both models.
STATS_LR = 1e-2


#: The leave-one-out ablation of DNT, each placement of the paper removed in turn (all trained with
#: mSGDW, as in the paper's ablation, at the tuned rate of DNT + mSGDW), by placement name.
ABLATIONS: dict[str, Placement] = {
    "InputNorm": replace(PLACEMENTS["dnt"], input_norm=False),
    "PreNorm": replace(PLACEMENTS["dnt"], attn_prenorm=False),
    "QK-norm": replace(PLACEMENTS["dnt"], qk_norm=False),
    "MidNorm": replace(PLACEMENTS["dnt"], mid_norm=False),
}
#: claim-name part of each placement
_KEY = {"InputNorm": "input_norm", "PreNorm": "prenorm", "QK-norm": "qk_norm", "MidNorm": "mid_norm"}
#: tuning seeds per cell (disjoint from the judging seeds: iclr_lab.core.tuning.tuning_seeds)
TUNING_SEEDS = 1
#: where the paper makes its claims, and where this chapter tests them
REGIME = ("paper: ViT-L/H on ImageNet and GPT-2 124M-1.4B on OpenWebText, bf16, fully trained, "
          "held-out top-1 or validation loss, learning rates mostly taken from prior work; here: a "
          "2-block d = 32 GPT on a seeded Zipf language (V = 512), 140 steps of 8 sequences of 32 "
          "tokens, fp32, held-out validation loss, each cell's peak rate tuned (core.tuning) on a "
          "tuning seed and judged on three other seeds")


def ablation_label(placement: str) -> str:
    """The table name of DNT without ``placement`` (trained with mSGDW), e.g. ``"DNT - MidNorm"``."""
    return f"DNT - {placement} + mSGDW"


@dataclass(frozen=True)
class _Sizes:
    steps: int
    batch_size: int
    val_sequences: int
    stats_step: int
    window: int  # steps per point of the learning curves (mean minibatch loss)
    seeds: int  # judging seeds per call (claims report their median)
    config: GPTConfig


_SIZES = {
    "smoke": _Sizes(steps=16, batch_size=4, val_sequences=16, stats_step=8, window=4, seeds=2,
                    config=GPTConfig(vocab=64, context=8, d_model=16, n_heads=2, d_ff=32)),
    # batch 8 (was 32 before the claims protocol; the chapter compares both at seeds 0-4);
    # 140 steps (was 200 until the claims protocol's runs had been seen: cut for the chapter's CPU
    # budget, so every claim whose value depends on the horizon is source="pilot"; the chapter
    # puts the 200-step values beside these); 128 validation sequences (was 256 until the
    # revision that had to bring the chapter under 0.75x the reference chapter's CPU time: the
    # evaluation is a tenth of a run's cost; the tuning scores on it, and at base seed 0 DNT + AdamW
    # then chose 0.05 instead of 0.45)
    "book": _Sizes(steps=140, batch_size=8, val_sequences=128, stats_step=50, window=10, seeds=3,
                   config=GPTConfig(d_model=32, n_heads=2, d_ff=128)),
    "paper": _Sizes(steps=2000, batch_size=64, val_sequences=2048, stats_step=50, window=50,
                    seeds=5, config=GPTConfig(vocab=2048, context=64, d_model=128, n_heads=8,
                                              n_layers=4, d_ff=512)),
}


#: the most models :class:`_Runs` trains in one stack (33 at once cost ~10% more per model than 11)
_STACK = 12


class _Runs:
    """Runs of :func:`~iclr_lab.optimizers.dnt.stacked.train_many`, trained stacked and remembered
    by ``(cell label, lr, seed)``."""

    def __init__(self, size: _Sizes) -> None:
        self.size = size
        self.done: dict[tuple[str, float, int, int | None], Any] = {}
        self.languages: dict[int, ZipfLanguage] = {}

    def train(self, jobs: Sequence[tuple[str, Placement | str, str, float | None, float, int,
                                         int | None, int | None]]) -> None:
        """Train ``(label, norm, optimizer, clip, lr, seed, stats_at, stop_at)`` jobs not yet run."""
        from iclr_lab.optimizers.dnt.stacked import Spec, train_many

        todo = [j for j in dict.fromkeys(jobs) if (j[0], j[4], j[5], j[7]) not in self.done]
        if not todo:
            return
        for j in todo:
            self.languages.setdefault(j[5], ZipfLanguage(vocab=self.size.config.vocab, seed=j[5]))
        # The standard models and DNT's family (DNT and its ablations) train in separate stacks:
        # a stack computes every norm that any of its models has, for all of its models
        # (``stacked._norm``), and a stack of standard models alone costs about 20% less per step
        # than one that mixes them with DNT's. Within a family, one placement's models sit side by
        # side. A stack's models share no computation, so neither the split nor the order changes
        # a number (``test_which_models_share_a_stack_changes_no_bit``; a stack of one model rounds
        # its gradient norm differently, which only a clipped run would feel).
        def placement(j: tuple[Any, ...]) -> Placement:
            return j[1] if isinstance(j[1], Placement) else PLACEMENTS[j[1]]

        families = [sorted((j for j in todo if (placement(j) == PLACEMENTS["pre"]) == standard),
                           key=lambda j: astuple(placement(j))) for standard in (True, False)]
        todo = [j for family in families for j in family]
        runs = []
        for family in families:
            # stacks of at most _STACK models, as even as can be: a larger stack's tensors outgrow
            # the cache and cost more per model
            specs = [Spec(norm, opt, lr, seed, clip, stats, stop)
                     for _, norm, opt, clip, lr, seed, stats, stop in family]
            groups = -(-len(specs) // _STACK)
            bounds = [round(k * len(specs) / groups) for k in range(groups + 1)] if specs else []
            runs += [run for a, b in zip(bounds, bounds[1:])  # noqa: B905 - one shorter by design
                     for run in train_many(specs[a:b], steps=self.size.steps,
                                           batch_size=self.size.batch_size,
                                           config=self.size.config,
                                           val_sequences=self.size.val_sequences,
                                           languages=self.languages)]
        for j, run in zip(todo, runs, strict=True):
            self.done[(j[0], j[4], j[5], j[7])] = run

    def get(self, label: str, lr: float, seed: int, stop: int | None = None) -> Any:
        return self.done[(label, lr, seed, stop)]


def _cell_job(cell: Cell, lr: float, seed: int, stats_at: int | None = None,
              stop_at: int | None = None) -> tuple[Any, ...]:
    return (cell.label, cell.norm, cell.opt, cell.clip, lr, seed, stats_at, stop_at)


def _tune(runs: _Runs, seed: int) -> tuple[list[Tuned], pd.DataFrame, pd.DataFrame]:
    """Tune each cell's peak rate with :func:`iclr_lab.core.tuning.tune` on its three-point grid
    (``GRIDS``), by the final validation loss on :data:`TUNING_SEEDS` tuning seeds (median).

    Every grid point of every cell trains first; the points a flag adds (``tune`` extends a
    grid once) train afterwards. Returns the choices, the sweep table and its curves.
    """
    from iclr_lab.core.tuning import tune, tuning_seeds

    seeds = tuning_seeds(seed, TUNING_SEEDS)
    runs.train([_cell_job(c, lr, s) for c in CELLS for lr in GRIDS[c.label] for s in seeds])
    missing: list[tuple[Any, ...]] = []

    def scorer(cell: Cell) -> Any:
        def score(values: Sequence[float]) -> list[float]:
            out = []
            for lr in values:
                if all((cell.label, lr, s, None) in runs.done for s in seeds):
                    out.append(float(np.median([runs.get(cell.label, lr, s).final_val_loss
                                                for s in seeds])))
                else:
                    missing.extend(_cell_job(cell, lr, s) for s in seeds)
                    out.append(math.nan)
            return out
        return score

    for cell in CELLS:  # a first pass only collects the points the extensions ask for
        tune(cell.label, scorer(cell), GRIDS[cell.label][1], grid=GRIDS[cell.label])
    runs.train(missing)
    tuned = [tune(c.label, scorer(c), GRIDS[c.label][1], grid=GRIDS[c.label]) for c in CELLS]
    sweep, curves = [], []
    size = runs.size
    for cell, t in zip(CELLS, tuned, strict=True):
        for lr in t.grid:
            for s in seeds:
                run = runs.get(cell.label, lr, s)
                point = GRIDS[cell.label].index(lr) if lr in GRIDS[cell.label] else -1
                matrices = [v for k, v in run.weight_norms.items() if k != "embedding"]
                sweep.append({"cell": cell.label, "arch": cell.arch, "optimizer": cell.optimizer,
                              "clip": cell.clip or 0.0, "grid_point": point, "lr": lr, "seed": s,
                              "val_loss": run.final_val_loss, "diverged": run.diverged,
                              "chosen": lr == t.choice,
                              "mean_weight_norm": math.inf if run.diverged
                              else float(np.mean(matrices))})
                if point >= 0:
                    curves.append(_curve(run.train_losses, size.window).assign(
                        cell=cell.label, grid_point=point, lr=lr, diverged=run.diverged))
    return tuned, _mark_best(pd.DataFrame(sweep)), pd.concat(curves, ignore_index=True)


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Tune the five cells on tuning seeds, train them and the four ablations on three seeds, and
    check the claims.

    The judging seeds are ``seed, seed + 1, ...``; each fixes the language, the initial weights,
    the minibatches and the validation set, the same for every cell, so the cells differ only in
    architecture, optimizer and rate. The rates are tuned on ``tuning_seeds(seed, 1)``, never on a
    judging seed. Runs whose loss becomes non-finite stop and count as infinitely bad.
    """
    size = pick(_SIZES, scale)
    seed_everything(seed)
    with timed() as elapsed:
        runs = _Runs(size)
        tuned, sweep, curves = _tune(runs, seed)
        choice = {t.method: t.choice for t in tuned}
        seeds = [seed + i for i in range(size.seeds)]
        jobs = []
        for cell in CELLS:
            lr = choice[cell.label]
            if not math.isfinite(lr):
                continue
            probe = cell.optimizer == "AdamW" and lr == STATS_LR
            jobs += [_cell_job(cell, lr, s, size.stats_step if probe else None) for s in seeds]
            if cell.optimizer == "AdamW" and not probe:  # the probe run stops after its stats
                jobs += [_cell_job(cell, STATS_LR, s, size.stats_step, size.stats_step)
                         for s in seeds]
        dnt_lr = choice[DNT_MSGDW]
        if math.isfinite(dnt_lr):
            jobs += [(ablation_label(k), p, "msgdw", None, dnt_lr, s, None, None)
                     for k, p in ABLATIONS.items() for s in seeds]
        runs.train(jobs)
        rows, stats, hists = [], [], []
        for label, _, opt, _, lr, s, _stats_at, stop in jobs:
            run = runs.get(label, lr, s, stop)
            if run.stats is not None and run.histograms is not None:
                arch = DNT if label.startswith("DNT") else STANDARD
                stats.append(run.stats.per_tensor.assign(arch=arch, seed=s))
                hists.append(run.histograms.assign(arch=arch, seed=s))
            if stop is not None:
                continue
            matrices = [v for k, v in run.weight_norms.items() if k != "embedding"]
            rows.append({"cell": label, "optimizer": "AdamW" if opt == "adamw" else "mSGDW",
                         "lr": lr, "seed": s, "val_loss": run.final_val_loss,
                         "diverged": run.diverged,
                         "mean_weight_norm": math.inf if run.diverged else float(np.mean(matrices))})
        language = runs.languages.get(seed) or ZipfLanguage(vocab=size.config.vocab, seed=seed)
        tables = {
            "sweep": sweep,
            "curves": curves,
            "final": pd.DataFrame(rows),
            "gradients": pd.concat(stats, ignore_index=True),
            "histograms": pd.concat(hists, ignore_index=True),
            "language": pd.DataFrame([{"vocab": language.vocab, "exponent": language.exponent,
                                       "copy_prob": language.copy_prob,
                                       "entropy_floor": language.entropy_floor(),
                                       "unigram_entropy": language.unigram_entropy(),
                                       "uniform_entropy": math.log(language.vocab)}]),
            "invariance": midnorm_invariance(),
            "tuning": pd.DataFrame([{"cell": t.method, "choice": t.choice, "grid": list(t.grid),
                                     "flags": "; ".join(t.flags)} for t in tuned]),
        }
        claims, tables["acceptance"] = _claims(tables, seeds)
    return Report(slug="dnt", scale=scale, seed=seed, tables=tables, claims=claims,
                  seconds=elapsed(), chart_builder=charts, tuning=tuned)


def _curve(losses: np.ndarray, window: int) -> pd.DataFrame:
    """Mean minibatch loss over consecutive windows of ``window`` steps (a diverged run ends early;
    its last, partial window is kept, and infinite values are dropped)."""
    rows = []
    for start in range(0, len(losses), window):
        chunk = losses[start:start + window]
        chunk = chunk[np.isfinite(chunk)]
        if len(chunk):
            rows.append({"step": start + len(losses[start:start + window]),
                         "train_loss": float(chunk.mean())})
    return pd.DataFrame(rows, columns=["step", "train_loss"])


def _mark_best(sweep: pd.DataFrame) -> pd.DataFrame:
    best = sweep.groupby("cell").val_loss.transform("min")
    return sweep.assign(best=(sweep.val_loss == best) & np.isfinite(sweep.val_loss))


# ---------------------------------------------------------------------------------------------
# claims
# ---------------------------------------------------------------------------------------------


def _losses(final: pd.DataFrame, cell: str, seeds: Sequence[int]) -> np.ndarray:
    """The validation loss of ``cell`` at its tuned rate, one per judging seed (inf if not run)."""
    by_seed = final[final.cell == cell].set_index("seed").val_loss
    return np.array([float(by_seed.get(s, math.inf)) for s in seeds])


def _ratio(num: float, den: float) -> float:
    """``num / den``, or NaN when ``den`` is not positive (the claim then fails: a gap that does
    not exist cannot be halved)."""
    return num / den if den > 0 and math.isfinite(num) and math.isfinite(den) else math.nan


def _text(values: Sequence[float]) -> str:
    """``median [min, max]`` of per-seed values."""
    med = float(np.median(values))
    return f"{med:.3g}" + (f" [{min(values):.3g}, {max(values):.3g}]" if len(values) > 1 else "")


def _claims(tables: dict[str, pd.DataFrame],
            seeds: Sequence[int]) -> tuple[list[Claim], pd.DataFrame]:
    """The claims, and the acceptance table that puts each test's control value beside DNT's."""
    final = tables["final"]
    loss = {c.label: _losses(final, c.label, seeds) for c in CELLS}
    for k in ABLATIONS:
        loss[ablation_label(k)] = _losses(final, ablation_label(k), seeds)
    adamw = loss[STD_ADAMW]
    gap_std = loss[STD_MSGDW] - adamw
    gap_clip = loss[STD_CLIP] - adamw
    gap_dnt = loss[DNT_MSGDW] - loss[DNT_ADAMW]

    def closes(label: str) -> list[float]:
        return [_ratio(a, b) for a, b in zip(loss[label] - adamw, gap_clip, strict=True)]

    dnt_closes = closes(DNT_MSGDW)
    unclipped = [_ratio(a, b) for a, b in zip(loss[DNT_MSGDW] - adamw, gap_std, strict=True)]
    sweep = tables["sweep"]
    interior = []
    for c in CELLS:
        chosen = sweep[(sweep.cell == c.label) & sweep.chosen]
        interior.append(len(chosen) > 0 and int(chosen.grid_point.iloc[0]) == 1)
    choices = ", ".join(f"{c.label}: {float(sweep[(sweep.cell == c.label) & sweep.chosen].lr.min()):g}"
                        if sweep[(sweep.cell == c.label) & sweep.chosen].size else
                        f"{c.label}: none" for c in CELLS)

    grads = tables["gradients"]

    def per_seed(arch: str, fn: Any) -> list[float]:
        return [float(fn(grads[(grads.arch == arch) & (grads.seed == s)])) for s in seeds]

    spread = {a: per_seed(a, lambda g: g.grad_over_weight.max() / g.grad_over_weight.min())
              for a in (STANDARD, DNT)}
    kurt = {a: per_seed(a, lambda g: g.excess_kurtosis.median()) for a in (STANDARD, DNT)}
    mech = [_ratio(d, s) for d, s in zip(spread[DNT], spread[STANDARD], strict=True)]

    inv = tables["invariance"]
    mid = float(inv[inv.layout == "mid"][["output_change", "jacobian_change"]].max().max())
    bare = float(inv[inv.layout == "none"].jacobian_change.max())

    claims = [
        Claim.over_seeds(
            "gap_exists",
            "On the standard pre-norm GPT, mSGDW's validation loss exceeds AdamW's by more "
            "than 0.05 nats, each at its tuned rate (median over the seeds of gap_std, nats). "
            f"With clipping at 1.0 the gap is {_text(gap_clip)}; on DNT it is {_text(gap_dnt)}.",
            gap_std, 0.05, ">", "mSGDW trails AdamW on standard Transformers: ImageNet top-1 78.2 "
            "vs 81.7 (ViT-L), OpenWebText loss 2.906 vs 2.867 (GPT-2 124M)",
            kind="paper", source="pilot",
            no_control="the claim is the paper's premise (the gap exists on the standard model), "
                       "not an effect of DNT; DNT's own gap is shown beside it",
            regime=REGIME),
        Claim.over_seeds(
            "dnt_closes_gap",
            "DNT trained with mSGDW ends within half the gap of the strongest mSGDW baseline: "
            "[L(DNT + mSGDW) - L(standard + AdamW)] / [L(standard + mSGDW, clip 1.0) - "
            "L(standard + AdamW)] <= 0.5 (median over the seeds). Against the unclipped standard "
            f"gap the ratio is {_text(unclipped)}.",
            dnt_closes, 0.5, "<=", "DNT + mSGDW 81.5 vs standard + AdamW 81.7 (ViT-L top-1); 2.849 "
            "vs 2.867 (GPT-2 124M loss)", expected=False, kind="paper", source="pilot",
            no_control="its controls are the four leave-one-out ablations of DNT, one claim each "
                       "(closes_gap_needs_*), measured by this same test",
            regime=REGIME),
    ]
    for k in ABLATIONS:
        label = ablation_label(k)
        claims.append(Claim.over_seeds(
            f"closes_gap_needs_{_KEY[k]}",
            f"The {k} placement is needed for dnt_closes_gap: DNT + mSGDW passes it (ratio <= 0.5, "
            f"median over the seeds) and DNT without {k}, trained with mSGDW at DNT + mSGDW's "
            "tuned rate, fails the same test (the control's value is its ratio). A control that "
            "passes means the other placements do the work at this scale.",
            dnt_closes, 0.5, "<=", "Ablation S1-S5 of the paper (mSGDW): each placement helps; "
            "InputNorm gives the big jump on ImageNet, MidNorm is in the best OpenWebText layouts",
            expected=False, kind="paper", source="pilot",
            control=f"{label} (leave-one-out ablation)", control_values=closes(label),
            regime=REGIME + "; the ablations run at DNT + mSGDW's tuned rate, not tuned themselves"))
    claims += [
        Claim.over_seeds(
            "dnt_msgdw_matches_adamw",
            "DNT + mSGDW is within 0.03 nats of standard + AdamW, or below it "
            "(L(DNT + mSGDW) - L(standard + AdamW), nats, median over the seeds)",
            loss[DNT_MSGDW] - adamw, 0.03, "<=", "OpenWebText loss, DNT + mSGDW minus standard + "
            "AdamW: -0.018 (124M), +0.011 (774M), -0.027 (1.4B)", expected=False, kind="paper",
            source="pilot", control=f"{STD_CLIP}, the strongest mSGDW baseline",
            control_values=gap_clip, regime=REGIME),
        Claim.paired(
            "dnt_helps_adamw",
            "With AdamW, DNT's validation loss is below the standard model's: the paired per-seed "
            "difference L(DNT + AdamW) - L(standard + AdamW) is below 0, its 95% t interval "
            "included (each at its tuned rate)",
            loss[DNT_ADAMW].tolist(), adamw.tolist(), 0.0, "<", "DNT outperforms its counterparts: "
            "2.863 vs 2.867 (GPT-2 124M), 82.1 vs 81.7 (ViT-L) with AdamW",
            expected=False, kind="paper", source="pilot",
            no_control="the test is itself the comparison with the control (the standard model "
                       "with AdamW, tuned on a grid of the same size)",
            regime=REGIME),
        Claim("midnorm_invariance",
              "Rescaling W_1 and W_2 of a ReLU feed-forward sub-block by c in {0.1, 10} leaves the "
              "MidNorm'd output and its input-Jacobian unchanged (largest relative change, float64, "
              f"epsilon = 0). Without MidNorm the Jacobian changes by up to {bare:.3g}.",
              mid, 1e-5, "<=", "Proposition 3 (MidNorm): the Jacobian is invariant to "
              "W_1 -> c1 W_1, W_2 -> c2 W_2", kind="theorem", source="prior"),
        Claim.over_seeds(
            "mechanism_spread",
            f"At step 50 of AdamW at lr = {STATS_LR:g}, the spread max/min over weight matrices "
            "(embedding excluded) of ||g|| / ||W|| on a fixed batch is at most half as large for "
            f"DNT as for the standard model (ratio, median over the seeds). Spreads: DNT "
            f"{_text(spread[DNT])}, standard {_text(spread[STANDARD])}; median excess kurtosis: "
            f"DNT {_text(kurt[DNT])}, standard {_text(kurt[STANDARD])}.",
            mech, 0.5, "<=", "DNT concentrates the gradient distribution (Fig. 1: |g| of V-DNT "
            "within [0, 1e-5], of the standard ViT spread over [0, 1e-4])", expected=False,
            kind="derivation", source="pilot"),
        Claim("interior_optima",
              "Every cell's tuned rate is the middle of its three-point grid (fraction of the five "
              f"cells, on the tuning seed). Tuned rates: {choices}.",
              float(np.mean(interior)), 1.0, ">=", "Not in the paper: the tuning is fair only if "
              "each grid brackets its optimum", expected=False, kind="sanity", source="pilot"),
    ]
    acceptance = pd.DataFrame([
        {"test": "mSGDW gap over standard + AdamW (nats)", "needed": "> 0.05 (standard)",
         "DNT": _text(loss[DNT_MSGDW] - adamw), "control": "standard + mSGDW (clip 1.0 / none)",
         "control's value": f"{_text(gap_clip)} / {_text(gap_std)}"},
        {"test": "fraction of the clipped gap left", "needed": "≤ 0.5", "DNT": _text(dnt_closes),
         "control": "standard + mSGDW (no clip)",
         "control's value": _text([_ratio(a, b) for a, b in zip(gap_std, gap_clip, strict=True)])},
        *({"test": f"fraction of the clipped gap left, without {k}", "needed": "≤ 0.5",
           "DNT": _text(dnt_closes), "control": ablation_label(k),
           "control's value": _text(closes(ablation_label(k)))} for k in ABLATIONS),
        {"test": "DNT + AdamW minus standard + AdamW (nats)", "needed": "< 0, interval included",
         "DNT": _text(loss[DNT_ADAMW] - adamw), "control": "standard + AdamW", "control's value": "0"},
        {"test": "own gap, mSGDW minus AdamW (nats)", "needed": "(shown)",
         "DNT": _text(gap_dnt), "control": "standard", "control's value": _text(gap_std)},
        {"test": "spread of ‖g‖/‖W‖ at step 50", "needed": "DNT ≤ 0.5 × standard",
         "DNT": _text(spread[DNT]), "control": "standard", "control's value": _text(spread[STANDARD])},
        {"test": "median excess kurtosis at step 50", "needed": "(shown)",
         "DNT": _text(kurt[DNT]), "control": "standard", "control's value": _text(kurt[STANDARD])},
        {"test": "Jacobian change when W₁, W₂ × c", "needed": "≤ 1e-5",
         "DNT": f"{mid:.2g}", "control": "no MidNorm", "control's value": f"{bare:.3g}"},
    ])
    return claims, acceptance


# ---------------------------------------------------------------------------------------------
# the numbers the chapter's prose quotes
# ---------------------------------------------------------------------------------------------


def numbers(report: Report) -> dict[str, float]:
    """Every number the chapter's prose quotes that is not a claim's value, computed from
    ``report.tables``; the chapter glues them (``{glue:text}`key```), so the text cannot drift
    from the tables. Losses and gaps are medians over the judging seeds."""
    t = report.tables
    sweep, final, lang, grads = t["sweep"], t["final"], t["language"].iloc[0], t["gradients"]
    seeds = sorted(final.seed.unique())
    loss = {c: _losses(final, c, seeds) for c in final.cell.unique()}
    choice = dict(zip(t["tuning"].cell, t["tuning"].choice.astype(float), strict=True))
    keys = {STD_ADAMW: "std_adamw", STD_MSGDW: "std_msgdw", DNT_ADAMW: "dnt_adamw",
            DNT_MSGDW: "dnt_msgdw", STD_CLIP: "std_clip"}
    med = lambda v: float(np.median(v))  # noqa: E731
    adamw = loss[STD_ADAMW]
    values: dict[str, float] = {
        "floor": float(lang.entropy_floor), "unigram": float(lang.unigram_entropy),
        "uniform": float(lang.uniform_entropy), "vocab": float(lang.vocab),
        "gap_std": med(loss[STD_MSGDW] - adamw),
        "gap_clip": med(loss[STD_CLIP] - adamw),
        # at the first judging seed alone (the seed the chapter's exercises reuse)
        "gap_clip_first": float((loss[STD_CLIP] - adamw)[0]),
        "gap_dnt": med(loss[DNT_MSGDW] - loss[DNT_ADAMW]),
        "gap_std_min": float(np.min(loss[STD_MSGDW] - adamw)),
        "gap_std_max": float(np.max(loss[STD_MSGDW] - adamw)),
        # the range over the seeds of DNT + mSGDW's lag behind standard + AdamW (the per-seed
        # values of dnt_msgdw_matches_adamw)
        "dnt_lag_min": float(np.min(loss[DNT_MSGDW] - adamw)),
        "dnt_lag_max": float(np.max(loss[DNT_MSGDW] - adamw)),
        "adamw_gain": med(adamw - loss[DNT_ADAMW]),
        # how much DNT narrows the distance between the two optimizers (medians' difference)
        "gap_narrowing": med(loss[STD_MSGDW] - adamw) - med(loss[DNT_MSGDW] - loss[DNT_ADAMW]),
        "diverged_runs": float(sweep.diverged.sum()),
        # the closing ratio's median against other references (exercise dnt-ex-reference)
        "ratio_unclipped": med((loss[DNT_MSGDW] - adamw) / (loss[STD_MSGDW] - adamw)),
        "ratio_best_adamw": med((loss[DNT_MSGDW] - np.minimum(adamw, loss[DNT_ADAMW]))
                                / (loss[STD_CLIP] - np.minimum(adamw, loss[DNT_ADAMW]))),
        "seeds": float(len(seeds)),
    }
    for label, key in keys.items():
        values[f"loss_{key}"] = med(loss[label])
        values[f"lr_{key}"] = choice[label]
        values[f"runs_{key}"] = float((sweep.cell == label).sum())  # tuning runs, extensions too
        values[f"excess_{key}"] = med(loss[label]) - float(lang.entropy_floor)
    for k in ABLATIONS:
        values[f"ablation_{_KEY[k]}"] = med(loss[ablation_label(k)] - loss[DNT_MSGDW])
        values[f"ablation_{_KEY[k]}_worse"] = float(np.sum(loss[ablation_label(k)]
                                                           > loss[DNT_MSGDW]))
        values[f"ablation_{_KEY[k]}_diverged"] = float(np.sum(~np.isfinite(
            loss[ablation_label(k)])))
    kurt = {}
    for arch, key in ((STANDARD, "std"), (DNT, "dnt")):
        per = [grads[(grads.arch == arch) & (grads.seed == s)] for s in seeds]
        values[f"spread_{key}"] = med([g.grad_over_weight.max() / g.grad_over_weight.min()
                                       for g in per])
        values[f"rms_spread_{key}"] = med([g.grad_rms.max() / g.grad_rms.min() for g in per])
        kurt[key] = np.array([g.excess_kurtosis.median() for g in per])
        values[f"kurtosis_{key}"] = med(kurt[key])
        values[f"hill_{key}"] = med([g.hill.median() for g in per])
    values["kurtosis_dnt_higher"] = float(np.sum(kurt["dnt"] > kurt["std"]))
    values["init_weight_norm"] = _init_weight_norm(report)
    values["midnorm_input_ms"], values["midnorm_input_ms_max"] = _midnorm_input_scale(report)
    values["norm_eps"] = pick(_SIZES, report.scale).config.norm_eps
    # the relative error eps / (2 ||f||^2 / d) of the normaliser at the median MidNorm input
    values["eps_error"] = values["norm_eps"] / (2 * values["midnorm_input_ms"])
    # for every cell whose tuned rate is an edge of its grid (on the tuning seed): how much lower
    # its loss is than the middle rate's (a near-tie says the loss is flat there); 0 when interior
    edge = []
    for _, s in sweep[sweep.grid_point >= 0].groupby("cell"):
        if s.best.any() and not s[s.best].grid_point.eq(1).any():
            edge.append(float(s.set_index("grid_point").val_loss.loc[1] - s.val_loss.min()))
    values["edge_tie_max"] = max(edge, default=0.0)
    values.update(_block_counts(report))
    return {k: float(v) for k, v in values.items()}


def _block_counts(report: Report) -> dict[str, float]:
    """Per-block counts from the shipped stability table (``iclr_lab/stability/dnt.json``); NaN
    where the table is missing or of another scale.

    An ablation's closing ratio is undefined (NaN) at a block where the clipped baseline does not
    trail AdamW; the core counts such a control as failing. A block counts as *defined* when any
    closing ratio there (the full DNT's or an ablation's) has a value; a missing ratio at a defined
    block means a run diverged. ``abl_<key>_fails_defined`` counts the control failures at defined
    blocks (``_diverged``: those with no value), ``abl_<key>_fails_at_dnt_pass`` those at the blocks
    where the full DNT passes. ``clip_closes_blocks``: blocks where the clipped baseline is within
    0.03 nats of AdamW (the control of ``dnt_msgdw_matches_adamw`` passes); ``dnt_ratio_missing``:
    blocks where the full DNT's ratio has no value."""
    from iclr_lab.core import stability

    table = stability.load(report.slug)
    names = ["dnt_closes_gap"] + [f"closes_gap_needs_{k}" for k in _KEY.values()]
    out: dict[str, float] = {}
    if (table is None or table.get("scale") != report.scale
            or not all(n in table["claims"] for n in names + ["dnt_msgdw_matches_adamw"])):
        keys = ["blocks_defined", "blocks_undefined", "dnt_pass_blocks", "clip_closes_blocks",
                "dnt_ratio_missing"]
        for k in _KEY.values():
            keys += [f"abl_{k}_fails_defined", f"abl_{k}_diverged", f"abl_{k}_fails_at_dnt_pass"]
        return dict.fromkeys(keys, math.nan)
    claims = table["claims"]
    n = table["blocks"]
    defined = [claims["dnt_closes_gap"][b]["measured"] is not None
               or any(claims[m][b]["control_measured"] is not None for m in names[1:])
               for b in range(n)]
    dnt_pass = [bool(claims["dnt_closes_gap"][b]["passed"]) for b in range(n)]
    out["blocks_defined"] = float(sum(defined))
    out["blocks_undefined"] = float(n - sum(defined))
    out["dnt_pass_blocks"] = float(sum(dnt_pass))
    out["dnt_ratio_missing"] = float(sum(e["measured"] is None for e in claims["dnt_closes_gap"]))
    out["clip_closes_blocks"] = float(sum(e["control_passed"] is True
                                          for e in claims["dnt_msgdw_matches_adamw"]))
    for k in _KEY.values():
        e = claims[f"closes_gap_needs_{k}"]
        fails = [e[b]["control_passed"] is False for b in range(n)]
        out[f"abl_{k}_fails_defined"] = float(sum(
            f and d for f, d in zip(fails, defined, strict=True)))
        out[f"abl_{k}_diverged"] = float(sum(d and e[b]["control_measured"] is None
                                             for b, d in enumerate(defined)))
        out[f"abl_{k}_fails_at_dnt_pass"] = float(sum(
            f and p for f, p in zip(fails, dnt_pass, strict=True)))
    return out


def _midnorm_input_scale(report: Report) -> tuple[float, float]:
    """The mean square ``||f||^2 / d`` of what enters each MidNorm of a freshly initialised DNT
    model of this scale on one batch (seed ``report.seed``): the median over the MidNorms and
    tokens, and the largest MidNorm's mean. Compare with the normaliser's epsilon."""
    import torch

    from iclr_lab.optimizers.dnt.model import TinyGPT

    size = pick(_SIZES, report.scale)
    torch.manual_seed(report.seed)
    model = TinyGPT(size.config, "dnt")
    seen: list[torch.Tensor] = []
    hooks = [m.register_forward_hook(lambda mod, i, o: seen.append(i[0].pow(2).mean(-1)))
             for n, m in model.named_modules() if n.endswith("midnorm")]
    lang = ZipfLanguage(vocab=size.config.vocab, seed=report.seed)
    tokens = torch.from_numpy(lang.sample(32, size.config.context, np.random.default_rng(0)))
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    return (float(torch.cat([s.flatten() for s in seen]).median()),
            max(float(s.mean()) for s in seen))


def _init_weight_norm(report: Report) -> float:
    """Mean Frobenius norm of the weight matrices of a freshly initialised DNT model of this scale
    (the same for every seed up to sampling noise; seed ``report.seed``)."""
    import torch

    from iclr_lab.optimizers.dnt.model import TinyGPT, weight_tensors

    torch.manual_seed(report.seed)
    model = TinyGPT(pick(_SIZES, report.scale).config, "dnt")
    with torch.no_grad():
        return float(np.mean([float(w.norm()) for _, w, _ in weight_tensors(model)]))


# ---------------------------------------------------------------------------------------------
# charts
# ---------------------------------------------------------------------------------------------


def _ticks(values: pd.Series) -> list[float]:
    """1-3-10 ticks covering ``values`` on a log axis (Vega's own crowd at two per decade)."""
    lo, hi = float(values.min()), float(values.max())
    ticks = [m * 10.0**e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in (1, 3)]
    return [t for t in ticks if lo / 1.01 <= t <= hi * 1.01]


def _legend(chart: Any) -> Any:
    """Show the colour legend of a chart with min-max bands (see the VRAdam chapter's note)."""
    return chart.resolve_legend(fill="independent")


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """The chapter's figures, built from ``report.tables`` only."""
    import altair as alt

    from iclr_lab.core.charts import BASELINE_COLORS, curves, palette, reference_line, sweep

    t = report.tables
    out: dict[str, alt.TopLevelMixin] = {}
    floor = float(t["language"].entropy_floor.iloc[0])

    sw = t["sweep"].replace([np.inf, -np.inf], np.nan).dropna(subset=["val_loss"])
    adamw_best = float(sw[sw.cell == STD_ADAMW].val_loss.min())
    sweep_chart = curves(sw, x="lr", y="val_loss", color="cell", log_x=True, highlight=DNT_MSGDW,
                         x_title="peak learning rate", y_title="final validation loss (nats)",
                         color_title="cell",
                         title="Validation loss against the learning rate (diverged runs not drawn)")
    # 1-3-10 ticks: Vega's own log ticks crowd at two per decade
    sweep_chart.layer[1].encoding.x.axis = alt.Axis(values=_ticks(sw.lr), format="~g")
    # the grey of "standard + AdamW" in the palette (the third series, the second baseline)
    best_line = reference_line(adamw_best, label="best of standard + AdamW", color=BASELINE_COLORS[1])
    best_line.layer[1].mark.dy = 12  # below the rule: standard + AdamW's own curve touches it above
    out["lr_sweep"] = _legend(
        sweep_chart + best_line
        + reference_line(floor, label="entropy floor")).configure_legend(labelLimit=260)

    # a diverged run's losses explode before they become infinite: leave it out of the chart
    cv = t["curves"][~t["curves"].diverged]
    curves_chart = sweep(
        cv, x="step", y="train_loss", param="grid_point", color="cell",
        param_label="grid point (0 = lowest rate)", start=1, highlight=DNT_MSGDW,
        x_title="step", y_title="training loss (mean of 10 steps, nats)", color_title="cell",
        # a Title (passed through to Altair, which takes one) makes room for the slider's label
        title=cast(str, alt.Title("Learning curves (diverged runs not drawn); slide through the "
                                  "grids", offset=20)))
    for layer in curves_chart.layer:  # the slider's label: above the plot, not over the curves
        if getattr(layer.mark, "type", layer.mark) == "text":
            layer.encoding.y = alt.value(-10)
    out["learning_curves"] = _legend(curves_chart).configure_legend(labelLimit=260)

    g = t["gradients"]
    g = g[g.seed == g.seed.min()]  # the first judging seed
    order = list(dict.fromkeys(g.tensor))
    arch_scale = palette([STANDARD, DNT], DNT)
    out["spread"] = alt.Chart(g).mark_point(filled=True, size=70).encode(
        x=alt.X("grad_over_weight:Q", scale=alt.Scale(type="log", nice=False),
                axis=alt.Axis(values=_ticks(g.grad_over_weight), format="~g"),
                title="‖g‖ / ‖W‖ on the probe batch"),
        y=alt.Y("tensor:N", sort=order, title=None),
        color=alt.Color("arch:N", title="model", scale=arch_scale),
        shape=alt.Shape("arch:N", title="model",
                        scale=alt.Scale(domain=[STANDARD, DNT], range=["square", "circle"])),
        tooltip=["arch", "tensor", alt.Tooltip("grad_over_weight:Q", format=".3g"),
                 alt.Tooltip("grad_rms:Q", format=".3g"),
                 alt.Tooltip("excess_kurtosis:Q", format=".3g"), alt.Tooltip("hill:Q", format=".3g")],
    ).properties(width=440, height=300,
                 title=f"Relative gradient size per weight matrix (AdamW, lr {STATS_LR:g}, step 50)")

    h = t["histograms"]
    h = h[h.seed == h.seed.min()]
    tensors = list(dict.fromkeys(h.tensor))
    pick_tensor = alt.param(name="tensor_param", value=tensors[0],  # the pooled histogram
                            bind=alt.binding_select(options=tensors, name="weight matrix "))
    # "step": each level is centred on its bin's centre (the table gives centres, not edges)
    out["histograms"] = alt.Chart(h).mark_line(interpolate="step").encode(
        x=alt.X("log10_grad:Q", title="log10 |gradient entry|"),
        y=alt.Y("fraction:Q", title="fraction of entries"),
        color=alt.Color("arch:N", title="model", scale=arch_scale),
        strokeWidth=alt.condition(alt.datum.arch == DNT, alt.value(2.6), alt.value(1.6)),
        tooltip=["arch", "tensor", alt.Tooltip("log10_grad:Q", format=".2f"),
                 alt.Tooltip("fraction:Q", format=".3f")],
    ).add_params(pick_tensor).transform_filter(alt.datum.tensor == pick_tensor).properties(
        width=440, height=240,
        title=alt.Title("Gradient entries, pooled or of one weight matrix (menu below)",
                        subtitle="entries outside 1e-9 to 1e-1 are counted in the end bins"))
    return out


def explorer() -> Explorer:
    """Live explorer: the singular values of a feed-forward sub-block's input-Jacobian with no norm,
    MidNorm (``dnt-eq-midnorm``) and PostNorm, as ``W_1`` and ``W_2`` are rescaled
    (``dnt-thm-midnorm``); see :func:`~iclr_lab.optimizers.dnt.theory.jacobian_explorer_chart`."""
    from iclr_lab.core.widgets import explorer as make
    from iclr_lab.core.widgets import log_slider

    return make(jacobian_explorer_chart,
                scale_w1=log_slider("W₁ scale", 1.0, 1e-2, 1e2),
                scale_w2=log_slider("W₂ scale", 1.0, 1e-2, 1e2))
