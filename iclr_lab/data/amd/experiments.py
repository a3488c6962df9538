"""The AMD chapter's experiments: ``reproduce()``, its claims, its charts and its explorer.

One seed runs: the paired digits split, six experts, three random, three class-stratified and three
k-means (SPM) coresets, and the four distillations of the ablation grid {synchronous, asynchronous}
x {random, SPM} initialisation. Every set, coreset or distilled, is evaluated the same way
(:func:`~iclr_lab.data.amd.method.evaluate_set`: one learning-rate grid, the rate chosen on a
validation split), so no set gains from a step size the others did not get.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from iclr_lab.core.report import Claim, Report, timed
from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.validation import check_choice, check_int, check_range, check_real, check_seed
from iclr_lab.data.amd.method import (
    DistillResult,
    PairedDigits,
    Trajectories,
    async_ranges,
    distill,
    distill_many,
    encode,
    evaluate_set,
    evaluate_sets,
    kmeans_prototypes,
    paired_digits,
    random_subset,
    retrieval_recall,
    stratified_subset,
    train_experts,
)

if TYPE_CHECKING:
    import altair as alt
    import matplotlib.figure

__all__ = ["COLORS", "CONFIGS", "METRICS", "charts", "explorer", "explorer_chart", "image_grid",
           "numbers", "pairs_table", "range_grid", "ranges_chart", "ranges_table",
           "recall_vs_pairs", "reproduce", "summary", "text_first_index"]

RANDOM, STRAT, KMEANS = "random coreset", "stratified coreset", "k-means coreset (SPM)"
#: AMD is built on LoRS; the matching here is MTT-VL's (no learned similarity matrix), so the
#: synchronous baseline is named "MTT-VL-style sync" and AMD's variant "MTT-VL + async + SPM".
SYNC, SYNC_KM = "MTT-VL-style sync", "MTT-VL-style sync + SPM"
ASYNC, AMD = "MTT-VL-style async", "AMD-style (MTT-VL async + SPM)"
FULL = "full data"
CORESETS = (RANDOM, STRAT, KMEANS)
#: The ablation grid, as set name -> (matching, initialisation) of
#: :func:`~iclr_lab.data.amd.method.distill`.
CONFIGS: dict[str, tuple[str, str]] = {SYNC: ("mtt", "random"), SYNC_KM: ("mtt", "kmeans"),
                                       ASYNC: ("amd", "random"), AMD: ("amd", "kmeans")}
SETS = (*CORESETS, *CONFIGS)
METRICS = ("IR@1", "IR@5", "IR@10", "TR@1", "TR@5", "TR@10", "RSUM")
#: One colour per set in every chart. AMD's two asynchronous variants get the method colours,
#: synchronous matching blue, the coresets grey, brown and green.
COLORS = {AMD: "#d62728", ASYNC: "#ff7f0e", SYNC_KM: "#1f4e9c", SYNC: "#6baed6",
          KMEANS: "#2ca02c", STRAT: "#8c564b", RANDOM: "#8c8c8c", FULL: "#000000"}
HIGHLIGHT = (AMD, ASYNC)


@dataclass(frozen=True)
class _Sizes:
    n_experts: int  # expert trajectories
    epochs: int  # epochs per expert (checkpoints 0..epochs)
    n_pairs: int  # B, the size of every coreset and distilled set
    iterations: int  # outer iterations of each distillation
    syn_steps: int  # unrolled student steps per iteration (N)
    subset_seeds: int  # coresets averaged over this many draws
    eval_steps: int  # full-batch SGD steps of each evaluation model
    eval_inits: int  # fresh models per learning rate in an evaluation
    premise_seeds: int  # distillation seeds of the text-first (premise) experiment
    premise_iterations: int  # outer iterations of each of its distillations


_SIZES = {
    "smoke": _Sizes(n_experts=2, epochs=6, n_pairs=10, iterations=6, syn_steps=3, subset_seeds=2,
                    eval_steps=20, eval_inits=1, premise_seeds=3,
                    premise_iterations=6),
    "book": _Sizes(n_experts=6, epochs=15, n_pairs=20, iterations=200, syn_steps=10,
                   subset_seeds=3, eval_steps=150, eval_inits=3, premise_seeds=3,
                   premise_iterations=100),
    "paper": _Sizes(n_experts=10, epochs=15, n_pairs=20, iterations=600, syn_steps=10,
                    subset_seeds=5, eval_steps=300, eval_inits=5, premise_seeds=5,
                    premise_iterations=600),
}
EXPERT_EPOCHS = 2  # M: epochs of the expert segment a student matches
SYNC_RANGE = 5  # synchronous starts s ~ U{0..5}
#: The premise regime: experts whose text branch learns 10x faster than the image branch (lr 0.1),
#: so that the text branch settles first, as AMD assumes.
LR_TEXT_FAST = 1.0
PREMISE_ASYNC, PREMISE_SYNC, PREMISE_SWAP = ("async (0..R_V, 0..R_L)", "MTT-VL-style sync (0..R_V)",
                                             "async, ranges swapped (0..R_L, 0..R_V)")
#: the control of the asynchrony claim: no asynchrony, both branches from the short range 0..R_L
PREMISE_SYNC_SHORT = "MTT-VL-style sync (0..R_L)"
PREMISE_SETS = (PREMISE_ASYNC, PREMISE_SYNC_SHORT, PREMISE_SYNC, PREMISE_SWAP)
REGIME_PREMISE = ("AMD's premise: experts' text branch at 10x the image rate, so the text branch "
                  "settles first (tested by text_first_premise); 8x8 digits, 20 pairs, 3 "
                  "distillation seeds")
REGIME_CHAPTER = ("the chapter's CPU regime: 8x8 digits, 20 pairs, experts at one rate for both "
                  "branches (the text branch does not settle first), one distillation per set")


def _row(name: str, kind: str, draw: int, metrics: dict[str, float]) -> dict[str, Any]:
    return {"set": name, "kind": kind, "draw": draw, **{m: metrics[m] for m in METRICS},
            "lr": metrics.get("lr", np.nan)}


def _nearest_captions(data: PairedDigits, texts: torch.Tensor) -> list[str]:
    """The training caption whose frozen embedding is nearest each synthetic text vector."""
    bank = torch.from_numpy(data.texts[data.train])
    idx = torch.cdist(texts, bank).argmin(1).numpy()
    return [data.caption(int(data.train[i])) for i in idx]


def _images_table(data: PairedDigits, results: dict[str, DistillResult]) -> pd.DataFrame:
    rows = []
    for name, res in results.items():
        init_imgs = data.images[res.init_rows]
        caps_init = [data.caption(int(i)) for i in res.init_rows]
        caps_dist = _nearest_captions(data, res.texts)
        for stage, imgs, caps in (("initial", init_imgs, caps_init),
                                  ("distilled", res.images.numpy(), caps_dist)):
            for j in range(len(imgs)):
                rows.append({"set": name, "stage": stage, "pair": j,
                             "label": int(data.labels[res.init_rows[j]]), "caption": caps[j],
                             **{f"px{k}": float(imgs[j, k]) for k in range(imgs.shape[1])}})
    return pd.DataFrame(rows)


def _movement_tables(traj: Trajectories) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    mv = traj.movement()
    rr = async_ranges(traj, EXPERT_EPOCHS)
    epochs = np.arange(1, traj.epochs + 1)
    parts = []
    halving = {}
    for key, branch in (("V", "image"), ("L", "text")):
        move = mv[f"move_{key}"].astype(float)
        rel = move / move[0]
        below = epochs[rel < 0.5]
        halving[branch] = int(below.min()) if len(below) else traj.epochs + 1
        parts.append(pd.DataFrame({"epoch": epochs, "branch": branch, "movement": move,
                                   "relative": rel, "mmd": mv[f"mmd_{key}"].astype(float),
                                   "seed": 0}))
    ratio = pd.DataFrame({"epoch": epochs, "ratio": np.asarray(rr["ratio"], float),
                          "median": float(rr["median"]), "seed": 0})  # type: ignore[arg-type]
    info = {"R_V": rr["R_V"], "R_L": rr["R_L"], "rule": rr["rule"], "R_V_rule": rr["R_V_rule"],
            "R_L_rule": rr["R_L_rule"], "median": rr["median"], "sync_range": SYNC_RANGE,
            "halving_image": halving["image"], "halving_text": halving["text"]}
    return pd.concat(parts, ignore_index=True), ratio, info


def text_first_index(traj: Trajectories) -> float:
    """The movement diagnostic of AMD's premise: the mean over epochs ``t = 2..E`` of the text
    branch's movement relative to its first epoch's, divided by the image branch's. Below 1 the
    text branch settles first (the premise of asynchronous matching); 1 or above, it does not."""
    mv = traj.movement()
    rel_v = mv["move_V"] / mv["move_V"][0]
    rel_l = mv["move_L"] / mv["move_L"][0]
    return float(np.mean(rel_l[1:] / rel_v[1:]))


def _premise(data: PairedDigits, size: _Sizes, seed: int) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                   dict[str, Any]]:
    """The premise experiment: experts whose text branch learns 10x faster; on them, asynchronous
    matching over the ranges of :func:`~iclr_lab.data.amd.method.async_ranges` (``R_V``, ``R_L``),
    MTT-VL-style sync over ``0..R_L`` (both branches from the short text range: the method without
    asynchrony), MTT-VL-style sync over ``0..R_V`` (the same image range) and asynchronous
    matching with the ranges swapped, each from the same random pairs at ``premise_seeds``
    distillation seeds, all in one batch and one evaluation."""
    fast = train_experts(data, n_experts=size.n_experts, epochs=size.epochs, lr_text=LR_TEXT_FAST,
                         seed=seed)
    rr = async_ranges(fast, EXPERT_EPOCHS)
    r_v, r_l = int(rr["R_V"]), int(rr["R_L"])  # type: ignore[call-overload]
    seeds = [size.premise_seeds * seed + k for k in range(size.premise_seeds)]
    # 100 outer iterations at book scale, half the ablation grid's, for the CPU budget (the
    # definition committed first, in 69c4463, used 200; see the claim's statement)
    common = {"n_pairs": size.n_pairs, "iterations": size.premise_iterations,
              "syn_steps": size.syn_steps,
              "expert_epochs": EXPERT_EPOCHS}
    # the four sets' distillations run as one batch, the swapped and the short sync ones with
    # their own ranges
    results = distill_many(data, fast, [("amd", "random", s) for s in seeds]
                           + [("mtt", "random", s) for s in seeds]
                           + [("amd", "random", s, (r_l, r_v)) for s in seeds]
                           + [("mtt", "random", s, r_l) for s in seeds], sync_range=r_v,
                           ranges=(r_v, r_l), **common)  # type: ignore[arg-type]
    names = [n for n in (PREMISE_ASYNC, PREMISE_SYNC, PREMISE_SWAP, PREMISE_SYNC_SHORT)
             for _ in seeds]
    scores = evaluate_sets(data, [(res.images, res.texts) for res in results],
                           n_inits=size.eval_inits, steps=size.eval_steps, seed=seed)
    rows = [{"set": n, "distill_seed": s, **{m: sc[m] for m in METRICS}, "lr": sc["lr"],
             "R_V": res.ranges[0], "R_L": res.ranges[1]}
            for n, s, sc, res in zip(names, seeds * 4, scores, results, strict=True)]
    movement, _, info = _movement_tables(fast)
    info = {**info, "lr_text": LR_TEXT_FAST, "index_fast": text_first_index(fast)}
    return pd.DataFrame(rows), movement, info


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Experts, coresets and the {sync, async} x {random, SPM} distillations at one seed.

    Every random source derives from ``seed``: the split, the experts, the coreset draws
    (``3 seed + k``), the distillations and the evaluation models. Every set is evaluated by
    :func:`~iclr_lab.data.amd.method.evaluate_set` on the same learning-rate grid. The four
    distillations run as one batch (:func:`~iclr_lab.data.amd.method.distill_many`) and the 13
    evaluations train together (:func:`~iclr_lab.data.amd.method.evaluate_sets`); each gives the
    numbers it gives alone, to the bit.
    """
    size = pick(_SIZES, scale)
    seed = check_seed(seed)
    seed_everything(seed)
    with timed() as elapsed:
        data = paired_digits(seed)
        traj = train_experts(data, n_experts=size.n_experts, epochs=size.epochs, seed=seed)
        x, t = data.tensors("test")
        rows = []
        with torch.no_grad():
            v, lt = encode(traj.v[:, -1], traj.l[:, -1], x, t)
        for e in range(traj.n_experts):
            rows.append(_row(FULL, "full data", e, retrieval_recall(v[e], lt[e])))

        def rows_of(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.from_numpy(data.images[idx]), torch.from_numpy(data.texts[idx])

        draws = [size.subset_seeds * seed + k for k in range(size.subset_seeds)]
        pickers = {RANDOM: lambda s: random_subset(data, size.n_pairs, s),
                   STRAT: lambda s: stratified_subset(data, size.n_pairs, s),
                   KMEANS: lambda s: kmeans_prototypes(data, traj.v[0, -1], traj.l[0, -1],
                                                       size.n_pairs, s)}
        picked = {(name, k): choose(s) for name, choose in pickers.items()
                  for k, s in enumerate(draws)}
        # every distillation starts from the first draw's pairs (random or SPM), so its gain over
        # that coreset is measured from its own starting point; the four run as one batch
        start = {"random": picked[RANDOM, 0], "kmeans": picked[KMEANS, 0]}
        runs = [(method, init, draws[0]) for method, init in CONFIGS.values()]
        distilled = distill_many(data, traj, runs, n_pairs=size.n_pairs,
                                 iterations=size.iterations, syn_steps=size.syn_steps,
                                 expert_epochs=EXPERT_EPOCHS,
                                 sync_range=min(SYNC_RANGE, size.epochs - 2),
                                 initial_rows=[start[init] for _, init, _ in runs])
        results: dict[str, DistillResult] = dict(zip(CONFIGS, distilled, strict=True))
        # every set, coreset or distilled, is evaluated the same way; the sets train together
        scores = evaluate_sets(data, [rows_of(idx) for idx in picked.values()]
                               + [(res.images, res.texts) for res in results.values()],
                               n_inits=size.eval_inits, steps=size.eval_steps, seed=seed)
        for (name, k), score in zip(picked, scores, strict=False):
            rows.append(_row(name, "coreset", k, score))
        loss_parts = []
        for name, res, score in zip(results, results.values(), scores[len(picked):], strict=True):
            rows.append({**_row(name, "distilled", 0, score),
                         "lr_v": res.lr_v, "lr_l": res.lr_l, "R_V": res.ranges[0],
                         "R_L": res.ranges[1]})
            it = np.arange(1, len(res.losses) + 1)
            smooth = pd.Series(res.losses).rolling(10, min_periods=1).mean().to_numpy()
            keep = np.unique(np.linspace(0, len(it) - 1, min(len(it), 100)).astype(int))
            loss_parts.append(pd.DataFrame({"set": name, "iteration": it[keep],
                                            "matching_loss": smooth[keep], "seed": 0}))
        movement, ratio, info = _movement_tables(traj)
        info["index_default"] = text_first_index(traj)
        premise, movement_fast, info_fast = _premise(data, size, seed)
        tables = {"recall": pd.DataFrame(rows), "movement": movement, "ratio": ratio,
                  "ranges": pd.DataFrame([info]), "premise": premise,
                  "movement_fast": movement_fast, "ranges_fast": pd.DataFrame([info_fast]),
                  "matching": pd.concat(loss_parts, ignore_index=True),
                  "images": _images_table(data, results)}
        tables["summary"] = summary(tables["recall"])
        tables["setup"] = pd.DataFrame([{
            "n_train": len(data.train), "n_val": len(data.val), "n_test": len(data.test),
            "n_pairs": size.n_pairs, "n_experts": size.n_experts, "epochs": size.epochs,
            "expert_epochs": EXPERT_EPOCHS, "iterations": size.iterations,
            "syn_steps": size.syn_steps, "subset_seeds": size.subset_seeds,
            "eval_steps": size.eval_steps, "eval_inits": size.eval_inits,
            "premise_seeds": size.premise_seeds, "premise_iterations": size.premise_iterations,
            "lr_text_fast": LR_TEXT_FAST}])
        claims = _claims(tables)
    return Report(slug="amd", scale=scale, seed=seed, tables=tables, claims=claims,
                  seconds=elapsed(), chart_builder=charts)


def summary(recall: pd.DataFrame) -> pd.DataFrame:
    """One row per set: each metric's mean over the set's draws (coresets) or experts (full data)."""
    out = recall.groupby("set", sort=False)[list(METRICS)].mean()
    return out.reindex([s for s in (*SETS, FULL) if s in out.index]).reset_index()


def _by_set(df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """``{set: {column: value}}`` of a table with one row per set."""
    return {str(r["set"]): {str(k): v for k, v in r.items()} for r in df.to_dict("records")}


def _first_row(df: pd.DataFrame) -> dict[str, Any]:
    return {str(k): v for k, v in df.to_dict("records")[0].items()}


def _claims(tables: dict[str, pd.DataFrame]) -> list[Claim]:
    s = _by_set(tables["summary"])

    def val(name: str, metric: str = "RSUM") -> float:
        return float(s[name][metric])

    full_min = min(val(FULL, "IR@1"), val(FULL, "TR@1"))
    km_ratio = val(KMEANS) / val(RANDOM)
    strat_ratio = val(STRAT) / val(RANDOM)
    sync_ratio = val(SYNC) / val(RANDOM)
    init_ratio = val(SYNC_KM) / max(val(SYNC), val(KMEANS))
    async_ratio = val(ASYNC, "IR@1") / max(val(SYNC, "IR@1"), 1e-9)
    amd_ratio = val(AMD, "IR@1") / max(val(SYNC_KM, "IR@1"), 1e-9)
    rng = _first_row(tables["ranges"])
    fast = _first_row(tables["ranges_fast"])
    prem = tables["premise"]

    def ir1(name: str) -> np.ndarray:
        return prem[prem.set == name].sort_values("distill_seed")["IR@1"].to_numpy(float)

    sync_ir1 = np.maximum(ir1(PREMISE_SYNC), 1e-9)
    ranges_by = ("AMD's MMD rule's ranges" if fast["rule"] == "MMD rule" else
                 "the fallback's ranges (AMD's MMD rule orders them the wrong way on these "
                 "experts)")
    return [
        Claim("pipeline", "The dual encoder trained on all training pairs reaches IR@1 and TR@1 "
              ">= 25% on the 500 test pairs (the smaller of the two, mean over the experts).",
              full_min, 25.0, ">=", paper="full-data models are the upper bound of every table",
              kind="sanity", source="prior"),
        Claim("kmeans_coreset", f"A k-means (SPM) coreset's RSUM is >= 1.5x a random coreset's, "
              f"both averaged over the coreset draws (a class-stratified random coreset: "
              f"{strat_ratio:.2f}x).", km_ratio, 1.5, ">=",
              paper="SPM alone: IR@1 8.6 -> 9.1 over LoRS on Flickr30k (no coreset-only row)",
              # the pilot put this ratio at 1.35-1.6 per seed, so the threshold sits at the edge;
              # it failed at seeds 0 and 1 of the book run and is reported, not moved
              expected=False, kind="derivation", source="pilot"),
        Claim("distill_vs_random", f"MTT-VL-style sync trajectory matching (random initialisation) "
              f"has an RSUM >= 1.3x a random coreset's, at equal evaluation tuning. Control: the "
              f"strongest set with no distillation, the k-means coreset, on the same test "
              f"({km_ratio:.2f}x).", sync_ratio, 1.3, ">=",
              paper="MTT-VL 4.6 vs random 1.1 IR@1 (Flickr30k, 200 pairs)",
              kind="paper", source="prior", control="k-means (SPM) coreset, no distillation",
              control_measured=km_ratio, regime=REGIME_CHAPTER),
        Claim("init_helps", "MTT-VL-style sync matching from SPM prototypes beats both sync "
              "matching from random pairs and the SPM coreset alone (RSUM ratio to the larger > 1).",
              init_ratio, 1.0, ">", paper="SPM improves matching (ablation, Flickr30k 200 pairs)",
              kind="paper", source="prior",
              no_control="the ratio is itself taken against both controls (sync matching from "
                         "random pairs, the SPM coreset alone); run on either it scores <= 1",
              regime=REGIME_CHAPTER),
        Claim("text_first_premise", f"AMD's premise, tested: in experts whose text branch learns "
              f"{LR_TEXT_FAST / 0.1:.0f}x faster (lr_text {LR_TEXT_FAST}), the text branch settles "
              f"first: the movement diagnostic (mean over epochs 2..E of the text branch's "
              f"relative movement over the image branch's) is < 1. In the chapter's experts (one "
              f"rate) it is {float(rng['index_default']):.2f}.", float(fast["index_fast"]), 1.0,
              "<", paper="AMD's premise: the text branch converges before the image branch",
              kind="derivation", source="pilot"),
        Claim.over_seeds(
            "async_gain_premise",
            f"Where the premise holds (experts' text rate 10x), asynchronous matching over "
            f"{ranges_by}, t_V in 0..R_V and t_L in 0..R_L, raises IR@1 >= 1.4x over MTT-VL-style "
            "sync matching "
            "over 0..R_V (the same image range): the median over distillation seeds of the "
            "paired per-seed ratio, all from the same random pairs. Control: the method without "
            "asynchrony at the short range, MTT-VL-style sync with both branches drawn from "
            "0..R_L, the same ratio to the same sync runs (async with the ranges swapped is "
            "reported beside it). Pilot: the definition committed first ran 200 outer iterations "
            "per distillation and gave 1.45 [1.43-1.80] against the swapped ranges' 1.42 "
            "[1.00-1.82] at seed 0 (not discriminating); cut to 100 for the CPU budget after that "
            "run; the control became sync over 0..R_L after a review.",
            ir1(PREMISE_ASYNC) / sync_ir1, 1.4, ">=",
            "ablation: LoRS 8.6 -> +async 12.1 IR@1 (1.41x)", expected=False, kind="paper",
            source="pilot", control="MTT-VL-style sync over 0..R_L (no asynchrony, short range)",
            control_values=ir1(PREMISE_SYNC_SHORT) / sync_ir1, regime=REGIME_PREMISE),
        Claim("async_gain", f"In the chapter's experts (one rate; the premise does not hold), "
              f"asynchronous matching raises IR@1 >= 1.4x over MTT-VL-style sync matching over "
              f"0..{SYNC_RANGE}, both from random pairs, one distillation each (with SPM: "
              f"{amd_ratio:.2f}x).", async_ratio, 1.4, ">=",
              paper="ablation: LoRS 8.6 -> +async 12.1 IR@1 (1.41x)", expected=False,
              kind="paper", source="paper",
              no_control="the ratio is itself taken against the control (MTT-VL-style sync); "
                         "the controlled test, with sync over 0..R_V, is async_gain_premise",
              regime=REGIME_CHAPTER),
    ]


# ---------------------------------------------------------------------------------------------
# recall against the number of pairs (precomputed for the explorer)
# ---------------------------------------------------------------------------------------------

PAIRS_GRID: tuple[int, ...] = (5, 10, 20, 40, 80)
CURVE_SETS = (RANDOM, KMEANS, SYNC, AMD)


def recall_vs_pairs(pairs: tuple[int, ...] = PAIRS_GRID, seed: int = 0, scale: str = "book",
                    sets: tuple[str, ...] = CURVE_SETS) -> pd.DataFrame:
    """Test recall of ``sets`` at every budget in ``pairs`` (one row per set and budget).

    Takes a few minutes at book scale; the chapter's explorer reads the copy saved in
    ``iclr_lab/data/amd/pairs_data.py`` (regenerate it with this function). Every budget in
    ``pairs`` is an integer in ``[1, 1097]`` (the training pairs), ``seed`` in ``[0, 2**32 - 1]``.
    """
    size = pick(_SIZES, scale)
    for name in sets:
        check_choice("sets", name, SETS)
    seed = check_seed(seed)
    seed_everything(seed)
    data = paired_digits(seed)
    budgets = [check_int("pairs", b, 1, len(data.train)) for b in pairs]  # before the experts train
    traj = train_experts(data, n_experts=size.n_experts, epochs=size.epochs, seed=seed)
    rows = []
    for b in budgets:
        for name in sets:
            if name in CONFIGS:
                method, init = CONFIGS[name]
                res = distill(data, traj, method=method, init=init, n_pairs=b,
                              iterations=size.iterations, syn_steps=size.syn_steps,
                              expert_epochs=EXPERT_EPOCHS,
                              sync_range=min(SYNC_RANGE, size.epochs - 2), seed=seed)
                imgs, txts = res.images, res.texts
            else:
                pick_rows = {RANDOM: random_subset, STRAT: stratified_subset}.get(name)
                idx = (pick_rows(data, b, seed) if pick_rows else
                       kmeans_prototypes(data, traj.v[0, -1], traj.l[0, -1], b, seed))
                imgs, txts = torch.from_numpy(data.images[idx]), torch.from_numpy(data.texts[idx])
            m = evaluate_set(data, imgs, txts, n_inits=size.eval_inits, steps=size.eval_steps,
                             seed=seed)
            rows.append({"set": name, "pairs": b, **{k: m[k] for k in METRICS}})
    return pd.DataFrame(rows)


RANGE_GRID: tuple[int, ...] = (1, 4, 7, 10, 13)


def range_grid(grid: tuple[int, ...] = RANGE_GRID, seed: int = 0, scale: str = "book",
               lr_text: float = LR_TEXT_FAST) -> pd.DataFrame:
    """Test IR@1 and RSUM of asynchronous matching from random pairs at every start-range pair
    ``(R_V, R_L)`` in ``grid`` x ``grid`` (capped at ``E - M``), on experts whose text branch learns
    at ``lr_text``, with the premise experiment's settings (one distillation seed, ``seed``).

    Takes a few minutes at book scale; the chapter's heat-map reads the copy saved in
    ``iclr_lab/data/amd/ranges_data.py`` (regenerate it with this function). ``lr_text`` is in
    ``(0, inf)``, ``seed`` in ``[0, 2**32 - 1]``, the ranges in ``grid`` are integers ``>= 0``."""
    size = pick(_SIZES, scale)
    seed = check_seed(seed)
    lr_text = check_range("lr_text", lr_text, 0, low_open=True)
    cap = size.epochs - EXPERT_EPOCHS
    pairs = [(min(check_int("grid", a, 0), cap), min(check_int("grid", b, 0), cap))
             for a in grid for b in grid]
    seed_everything(seed)
    data = paired_digits(seed)
    fast = train_experts(data, n_experts=size.n_experts, epochs=size.epochs, lr_text=lr_text,
                         seed=seed)
    results = [distill(data, fast, method="amd", init="random", n_pairs=size.n_pairs,
                       iterations=size.premise_iterations, syn_steps=size.syn_steps,
                       expert_epochs=EXPERT_EPOCHS, ranges=rv_rl, seed=seed) for rv_rl in pairs]
    scores = evaluate_sets(data, [(r.images, r.texts) for r in results], n_inits=size.eval_inits,
                           steps=size.eval_steps, seed=seed)
    return pd.DataFrame([{"R_V": a, "R_L": b, "IR@1": sc["IR@1"], "RSUM": sc["RSUM"]}
                         for (a, b), sc in zip(pairs, scores, strict=True)])


def ranges_table() -> pd.DataFrame:
    """The precomputed :func:`range_grid` table (book scale, seed 0, text rate 10x) that the
    chapter's heat-map reads: one row per ``(R_V, R_L)``, recalls in percent."""
    from iclr_lab.data.amd.ranges_data import ROWS as RANGE_ROWS

    return pd.DataFrame(RANGE_ROWS, columns=["R_V", "R_L", "IR@1", "RSUM"])


def ranges_chart(used: tuple[float, float] | None = None) -> alt.LayerChart | alt.FacetChart:
    """Heat-map of the precomputed :func:`ranges_table`: IR@1 of asynchronous matching at each
    ``(R_V, R_L)`` on the text-first experts (seed 0, one distillation per cell). ``used``, the
    ranges the premise experiment used, outlines the grid's cell nearest them (the grid need not
    hold them)."""
    import altair as alt

    df = ranges_table()
    base = alt.Chart(df).encode(x=alt.X("R_L:O", title="R_L (text start range)"),
                                y=alt.Y("R_V:O", title="R_V (image start range)", sort="descending"))
    heat = base.mark_rect().encode(color=alt.Color("IR@1:Q", scale=alt.Scale(scheme="viridis"),
                                                   title="IR@1 (%)"),
                                   tooltip=["R_V", "R_L", alt.Tooltip("IR@1:Q", format=".1f"),
                                            alt.Tooltip("RSUM:Q", format=".1f")])
    text = base.mark_text(fontSize=11, color="white").encode(text=alt.Text("IR@1:Q", format=".1f"))
    layers: list[alt.Chart] = [heat, text]
    subtitle = ["above the diagonal the image branch gets the longer range, as AMD intends"]
    if used is not None:
        rv, rl = _nearest(RANGE_GRID, used[0]), _nearest(RANGE_GRID, used[1])
        cell = df[(df.R_V == rv) & (df.R_L == rl)]
        layers.append(alt.Chart(cell).mark_rect(fill=None, stroke="#d62728", strokeWidth=3).encode(
            x="R_L:O", y=alt.Y("R_V:O", sort="descending")))
        exact = (rv, rl) == (used[0], used[1])
        subtitle.append(f"red outline: the premise experiment's ranges ({used[0]:.0f}, "
                        f"{used[1]:.0f})" + ("" if exact else f", nearest grid cell ({rv}, {rl})"))
    return alt.layer(*layers, width=260, height=230, title=alt.TitleParams(
        "Async matching IR@1 by start ranges (text-first experts, seed 0, precomputed)",
        subtitle=subtitle))


def _nearest(grid: tuple[int, ...], value: float) -> int:
    """The entry of ``grid`` nearest ``value`` (the smaller one on a tie)."""
    return min(grid, key=lambda g: (abs(g - value), g))


def pairs_table() -> pd.DataFrame:
    """The precomputed :func:`recall_vs_pairs` table (book scale, seed 0) that the explorer and the
    ``pairs`` chart read: one row per set and budget ``pairs``, recalls in percent."""
    from iclr_lab.data.amd.pairs_data import ROWS

    return pd.DataFrame(ROWS, columns=["set", "pairs", *METRICS])


def _pairs_long(df: pd.DataFrame) -> pd.DataFrame:
    """Tidy: one row per set, budget, direction and K."""
    parts = []
    for d, name in (("IR", "image retrieval (caption → image)"),
                    ("TR", "text retrieval (image → caption)")):
        for k in (1, 5, 10):
            parts.append(df[["set", "pairs"]].assign(direction=name, K=k, recall=df[f"{d}@{k}"],
                                                     seed=0))
    return pd.concat(parts, ignore_index=True)


# ---------------------------------------------------------------------------------------------
# charts
# ---------------------------------------------------------------------------------------------


def _bars(df: pd.DataFrame, metric: str, title: str, order: list[str]) -> alt.LayerChart:
    import altair as alt

    from iclr_lab.core.charts import palette

    mean = df.groupby("set", sort=False)[metric].mean().reindex(order).reset_index()
    color = alt.Color("set:N", scale=palette(order, colors=COLORS), legend=None)
    y = alt.Y("set:N", sort=order, title=None)
    bars = alt.Chart(mean).mark_bar().encode(
        x=alt.X(f"{metric}:Q", title=f"{metric} (%)" if metric != "RSUM" else "RSUM (sum of six recalls, %)"),
        y=y, color=color, tooltip=["set", alt.Tooltip(f"{metric}:Q", format=".1f")])
    pts = alt.Chart(df).mark_tick(color="black", thickness=2, size=12).encode(
        x=f"{metric}:Q", y=y, tooltip=["set", "draw", alt.Tooltip(f"{metric}:Q", format=".1f")])
    return alt.LayerChart(layer=[bars, pts], title=title, width=260, height=190)


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """The chapter's charts: ``recall`` (RSUM and IR@1 of every set), ``movement`` (the experts'
    per-epoch movement per branch and AMD's ratio rule), ``matching`` (the matching loss during
    distillation) and ``pairs`` (recall against the number of pairs, precomputed, with a K slider)."""
    import altair as alt

    from iclr_lab.core.charts import axis, curves, recolor, reference_line, sweep

    rec = report.tables["recall"]
    rec = rec[rec.kind != "full data"]
    order = list(SETS)
    recall = alt.hconcat(_bars(rec, "RSUM", "RSUM (bars: mean over draws; ticks: each draw)", order),
                         _bars(rec, "IR@1", "IR@1, caption → image", order)).resolve_scale(y="shared")
    mv = report.tables["movement"]
    rng = _first_row(report.tables["ranges"])
    move = curves(mv, x="epoch", y="relative", color="branch",
                  title="Expert movement per epoch (mean over experts)",
                  x_title="epoch t", y_title="‖θ(t) − θ(t−1)‖ / first epoch's",
                  colors={"image": "#1f77b4", "text": "#ff7f0e"})
    move_chart = alt.layer(move, reference_line(0.5, label="half the first epoch's"))
    ratio = report.tables["ratio"]
    rline = alt.Chart(ratio).mark_line(point=True, color="#444").encode(
        x=alt.X("epoch:Q", title="epoch t"), y=alt.Y("ratio:Q", title="MMD ratio r(t) = image / text",
                                                    scale=alt.Scale(zero=True)))
    marks = pd.DataFrame({"epoch": [float(rng["R_V_rule"]), float(rng["R_L_rule"])],
                          "label": [f"rule's R_V = {rng['R_V_rule']}", f"rule's R_L = {rng['R_L_rule']}"]})
    vrules = alt.Chart(marks).mark_rule(strokeDash=[2, 2], color="#d62728").encode(x="epoch:Q")
    vtext = alt.Chart(marks).mark_text(align="left", dx=3, color="#d62728",
                                       fontSize=11).encode(x="epoch:Q", y=alt.value(200),
                                                           text="label:N")
    ratio_chart = alt.layer(rline, reference_line(float(rng["median"]), label="median"), vrules,
                            vtext, title="AMD's MMD ratio rule", width=300, height=220)
    movement = axis(alt.hconcat(move_chart, ratio_chart), "epoch", tickMinStep=1, format="d")
    matching = curves(report.tables["matching"], x="iteration", y="matching_loss", color="set",
                      title="Matching loss during distillation (10-iteration mean)",
                      x_title="outer iteration", y_title="normalised matching loss",
                      color_title="distillation", highlight=HIGHLIGHT, colors=COLORS)
    long = _pairs_long(pairs_table())
    pairs = sweep(long[long.direction.str.startswith("image")], x="pairs", y="recall", param="K",
                  color="set", log_x=True, start=1, param_label="K",
                  title="IR@K against the number of pairs (seed 0, precomputed)",
                  x_title="pairs B", y_title="IR@K (%, log scale)", color_title="set",
                  highlight=(AMD,), colors=COLORS, log_y=True)
    # the legends' set names are long ("AMD-style (MTT-VL async + SPM)"): no cut
    return {"recall": recall, "movement": movement.configure_legend(labelLimit=320),
            "matching": recolor(matching, COLORS).configure_legend(labelLimit=320),
            "pairs": pairs.configure_legend(labelLimit=320), "premise": _premise_chart(report)}


def _premise_chart(report: Report) -> alt.HConcatChart:
    """Left: both branches' relative movement in the text-first experts. Right: IR@1 of the three
    premise distillations at each distillation seed, a line joining each seed's runs."""
    import altair as alt

    from iclr_lab.core.charts import curves, reference_line

    move = curves(report.tables["movement_fast"], x="epoch", y="relative", color="branch",
                  title="Text-first experts (text rate 10x): movement per epoch",
                  x_title="epoch t", y_title="‖θ(t) − θ(t−1)‖ / first epoch's",
                  colors={"image": "#1f77b4", "text": "#ff7f0e"})
    prem = report.tables["premise"]
    order = list(PREMISE_SETS)
    x = alt.X("set:N", sort=order, title=None, axis=alt.Axis(labelAngle=-25, labelLimit=320))
    lines = alt.Chart(prem).mark_line(color="#bbbbbb").encode(
        x=x, y=alt.Y("IR@1:Q", title="IR@1 (%)"), detail="distill_seed:N")
    # one colour per premise set, none shared with the movement panel's branches (the two panels'
    # colour scales are independent); the x axis names the sets, so no legend
    pts = alt.Chart(prem).mark_point(filled=True, size=60).encode(
        x=x, y="IR@1:Q", color=alt.Color("set:N", sort=order, legend=None,
                                         scale=alt.Scale(domain=order,
                                                         range=["#d62728", "#1f4e9c", "#6baed6",
                                                                "#9467bd"])),
        tooltip=["set", "distill_seed", alt.Tooltip("IR@1:Q", format=".2f")])
    right = alt.layer(lines, pts, title="IR@1 per distillation seed (lines join a seed's runs)",
                      width=300, height=220)
    return alt.hconcat(alt.layer(move, reference_line(0.5, label="half the first epoch's")),
                       right).resolve_scale(color="independent")


def image_grid(report: Report, sets: tuple[str, ...] = (SYNC_KM, AMD)) -> matplotlib.figure.Figure:
    """Matplotlib grid: for each set in ``sets``, its initial pairs' images above the distilled
    ones (8x8 pixels, one grey scale from 0 to 1). The figure is closed (show it with
    ``savefig``)."""
    import matplotlib.pyplot as plt

    imgs = report.tables["images"]
    px = [f"px{k}" for k in range(64)]
    n = int(imgs.pair.max()) + 1
    fig, axes = plt.subplots(2 * len(sets), n, figsize=(0.6 * n, 1.5 * len(sets) + 0.6), dpi=110,
                             squeeze=False)
    for r, name in enumerate(sets):
        for s, stage in enumerate(("initial", "distilled")):
            part = imgs[(imgs.set == name) & (imgs.stage == stage)].sort_values("pair")
            for j, (_, row) in enumerate(part.iterrows()):
                ax = axes[2 * r + s, j]
                ax.imshow(row[px].to_numpy(float).reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
                ax.set_xticks([])
                ax.set_yticks([])
            axes[2 * r + s, 0].set_ylabel(f"{stage}", fontsize=9, rotation=0, ha="right",
                                          va="center")
        axes[2 * r, n // 2].set_title(name, fontsize=11)
    fig.tight_layout(pad=0.2)
    plt.close(fig)
    return fig


# ---------------------------------------------------------------------------------------------
# explorer
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _explorer_state() -> tuple[PairedDigits, Trajectories]:
    data = paired_digits(0)
    return data, train_experts(data, n_experts=1, epochs=15, seed=0)


@functools.lru_cache(maxsize=16)
def _experts_at(lr_text: float) -> Trajectories:
    data, _ = _explorer_state()
    return train_experts(data, n_experts=2, epochs=15, lr_text=lr_text, seed=0)


def _premise_panel(lr_text: float) -> alt.LayerChart | alt.FacetChart:
    """Two experts trained live with the text branch at ``lr_text`` (image branch 0.1): each
    branch's movement per epoch relative to its first, the movement diagnostic and AMD's ranges."""
    import altair as alt

    from iclr_lab.core.charts import reference_line

    traj = _experts_at(lr_text)
    mv = traj.movement()
    epochs = np.arange(1, traj.epochs + 1)
    df = pd.concat([pd.DataFrame({"epoch": epochs, "branch": branch,
                                  "relative": mv[f"move_{key}"] / mv[f"move_{key}"][0]})
                    for key, branch in (("V", "image"), ("L", "text"))], ignore_index=True)
    idx = text_first_index(traj)
    rr = async_ranges(traj, EXPERT_EPOCHS)
    verdict = "text settles first: AMD's premise holds" if idx < 1 else (
        "text does not settle first: AMD's premise fails")
    line = alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("epoch:Q", title="epoch t"),
        y=alt.Y("relative:Q", title="movement / first epoch's"),
        color=alt.Color("branch:N", scale=alt.Scale(domain=["image", "text"],
                                                   range=["#1f77b4", "#ff7f0e"])),
        tooltip=["branch", "epoch", alt.Tooltip("relative:Q", format=".2f")])
    return alt.layer(line, reference_line(0.5, label="half the first epoch's"), width=260, height=230,
                     title=alt.TitleParams(f"Experts with text rate {lr_text:g} (image 0.1)",
                                           subtitle=[f"diagnostic {idx:.2f}: {verdict}",
                                                     f"ranges R_V = {rr['R_V']}, "
                                                     f"R_L = {rr['R_L']} (set by the "
                                                     f"{rr['rule']})"]))


def _slider_value(name: str, value: float, low: float, high: float) -> float:
    """``check_range(name, value, low, high)``, with a log slider's float noise at its ends
    (``10 ** log10(80)`` need not be 80 exactly) taken as the end itself."""
    x = check_real(name, value)
    if low * (1 - 1e-9) <= x <= high * (1 + 1e-9):
        x = min(max(x, low), high)
    return check_range(name, x, low, high)


def explorer_chart(pairs: float = 20, init: str = "k-means", metric: str = "RSUM",
                   lr_text: float = 0.1) -> alt.HConcatChart:
    """Left: ``metric`` against the number of pairs for every set (precomputed, seed 0), the budget
    ``pairs`` marked. Middle: the ``pairs`` images an initialisation picks at that budget
    (``init``: "k-means", the SPM prototypes of ``amd-eq-spm``, or "random"), labelled by digit.
    Right: two experts trained live with the text branch's rate ``lr_text`` (the image branch's
    is 0.1): each branch's relative movement per epoch, the movement diagnostic
    (:func:`text_first_index`, below 1 when the text branch settles first) and AMD's ranges.
    ``pairs`` is in [5, 80] (rounded to an integer), ``lr_text`` in [0.01, 3] (rounded to 4
    decimals), the ranges of the explorer's sliders."""
    b = int(round(_slider_value("pairs", pairs, 5, 80)))
    lr_text = float(np.round(_slider_value("lr_text", lr_text, 0.01, 3.0), 4))
    check_choice("init", init, ("k-means", "random"))
    check_choice("metric", metric, METRICS)

    import altair as alt

    from iclr_lab.core.charts import palette

    data, traj = _explorer_state()
    idx = (kmeans_prototypes(data, traj.v[0, -1], traj.l[0, -1], b, 0) if init == "k-means"
           else random_subset(data, b, 0))
    table = pairs_table()
    order = [s for s in CURVE_SETS if s in set(table.set)]
    color = alt.Color("set:N", scale=palette(order, colors=COLORS), title="set",
                      legend=alt.Legend(labelLimit=320))
    x = alt.X("pairs:Q", scale=alt.Scale(type="log", domain=[4, 100], nice=False), title="pairs B",
              axis=alt.Axis(values=list(PAIRS_GRID)))
    line = alt.Chart(table).mark_line(point=True).encode(
        x=x, y=alt.Y(f"{metric}:Q", title=f"{metric} (%)"), color=color,
        tooltip=["set", "pairs", alt.Tooltip(f"{metric}:Q", format=".1f")])
    rule = alt.Chart(pd.DataFrame({"pairs": [b]})).mark_rule(strokeDash=[4, 3]).encode(x="pairs:Q")
    left = alt.layer(line, rule, title=f"{metric} against B (seed 0, precomputed)", width=300,
                     height=230)
    cols = 10
    pix = data.images[idx].reshape(-1, 8, 8)
    rr, cc = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    grid = pd.DataFrame({
        "col": np.concatenate([(j % cols) * 9 + cc.ravel() for j in range(b)]),
        "row": np.concatenate([(j // cols) * 9 + rr.ravel() for j in range(b)]),
        "ink": pix.reshape(b, -1).ravel().astype(float),
    })
    # blank pixels are the white background anyway; dropping them keeps the chart's data small
    # (80 digits of 64 pixels would pass Altair's 5000-row limit)
    grid = grid[grid.ink > 0]
    rows_needed = (b + cols - 1) // cols
    grid["col2"], grid["row2"] = grid["col"] + 1, grid["row"] + 1
    right = alt.Chart(grid).mark_rect().encode(
        x=alt.X("col:Q", axis=None, scale=alt.Scale(domain=[0, cols * 9], nice=False)), x2="col2:Q",
        y=alt.Y("row:Q", axis=None, scale=alt.Scale(domain=[0, rows_needed * 9], nice=False,
                                                    reverse=True)), y2="row2:Q",
        color=alt.Color("ink:Q", scale=alt.Scale(scheme="greys", domain=[0, 1]), legend=None),
    ).properties(width=cols * 9 * 5, height=rows_needed * 9 * 5,
                 title=alt.TitleParams(f"The {b} real pairs {init} picks", subtitle=(
                     f"digits: {' '.join(str(d) for d in np.sort(data.labels[idx])[:40])}"
                     f"{' …' if b > 40 else ''}")))
    return alt.hconcat(left, right, _premise_panel(lr_text))


def explorer() -> Any:
    """Live explorer: the budget B, the initialisation (k-means or random), the metric and the
    experts' text rate; shows recall against B (precomputed), the pairs the initialisation picks
    and the experts' movement diagnostic at that text rate (both computed live)."""
    import ipywidgets as widgets

    from iclr_lab.core.widgets import explorer as make
    from iclr_lab.core.widgets import log_slider

    return make(explorer_chart, pairs=log_slider("pairs B", 20, 5, 80, steps_per_decade=8),
                init=widgets.Dropdown(options=["k-means", "random"], value="k-means",
                                      description="initialisation"),
                metric=widgets.Dropdown(options=list(METRICS), value="RSUM", description="metric"),
                lr_text=log_slider("text rate", 0.1, 0.01, 3.0, steps_per_decade=4))


def numbers(report: Report) -> dict[str, Any]:
    """The numbers the chapter's prose quotes (glued by name), read off ``report``'s tables."""
    s = _by_set(report.tables["summary"])
    rec = report.tables["recall"]
    distilled = _by_set(rec[rec.kind == "distilled"])
    rng = _first_row(report.tables["ranges"])
    out: dict[str, Any] = {k: float(v) for k, v in _first_row(report.tables["setup"]).items()}
    keys = {RANDOM: "random", STRAT: "strat", KMEANS: "kmeans", SYNC: "sync", SYNC_KM: "sync_km",
            ASYNC: "async", AMD: "amd", FULL: "full"}
    for name, key in keys.items():
        for metric in ("RSUM", "IR@1", "TR@1"):
            out[f"{metric.lower().replace('@', '')}_{key}"] = float(s[name][metric])
    for name in CONFIGS:
        for col in ("lr", "lr_v", "lr_l"):
            out[f"{col.replace('_', '')}_{keys[name]}"] = float(distilled[name][col])

    def ratio(a: str, b: str, metric: str = "RSUM") -> float:
        return float(s[a][metric]) / float(s[b][metric])

    out["sync_vs_kmeans"] = ratio(SYNC, KMEANS)
    out["strat_ratio"] = ratio(STRAT, RANDOM)
    out["amd_vs_sync_km"] = ratio(AMD, SYNC_KM, "IR@1")
    out["amd_rsum_vs_sync_km"] = ratio(AMD, SYNC_KM)
    out["async_rsum_vs_sync"] = ratio(ASYNC, SYNC)
    for k in ("R_V", "R_L", "R_V_rule", "R_L_rule", "halving_image", "halving_text", "sync_range"):
        out[k] = float(rng[k])
    out["rule"] = "MMD rule" if rng["rule"] == "MMD rule" else "fallback rule"
    gap = int(rng["halving_image"]) - int(rng["halving_text"])
    out["asynchrony"] = "shows" if gap >= 2 else "does not show"
    out["halving_gap"] = float(gap)
    out["index_default"] = float(rng["index_default"])
    fast = _first_row(report.tables["ranges_fast"])
    out["index_fast"] = float(fast["index_fast"])
    out["R_V_fast"], out["R_L_fast"] = float(fast["R_V"]), float(fast["R_L"])
    out["halving_image_fast"] = float(fast["halving_image"])
    out["halving_text_fast"] = float(fast["halving_text"])
    out["R_V_rule_fast"], out["R_L_rule_fast"] = float(fast["R_V_rule"]), float(fast["R_L_rule"])
    out["rule_fast"] = "MMD rule" if fast["rule"] == "MMD rule" else "fallback (inferred)"
    for key, index in (("default", out["index_default"]), ("fast", out["index_fast"])):
        out[f"settles_{key}"] = "settles first" if index < 1 else "does not settle first"
    prem = report.tables["premise"]
    keys_p = {PREMISE_ASYNC: "async", PREMISE_SYNC_SHORT: "sync_short", PREMISE_SYNC: "sync",
              PREMISE_SWAP: "swap"}
    ir_of = {}
    for name, key in keys_p.items():
        ir = prem[prem.set == name].sort_values("distill_seed")["IR@1"].to_numpy(float)
        ir_of[key] = ir
        out[f"ir1_premise_{key}"] = float(np.median(ir))
        out[f"ir1_premise_{key}_min"], out[f"ir1_premise_{key}_max"] = float(ir.min()), float(ir.max())
        out[f"ir1_premise_{key}_spread"] = float(ir.max() - ir.min())
    out["ir1_premise_spread_max"] = max(out[f"ir1_premise_{k}_spread"] for k in keys_p.values())
    out["ir1_premise_spread_min"] = min(out[f"ir1_premise_{k}_spread"] for k in keys_p.values())
    # the paired per-seed ratios the claim does not take: async over the short sync (the direct
    # test of asynchrony at the short range) and the swapped ranges over the long sync
    for key, (a, b) in {"async_vs_sync_short": ("async", "sync_short"),
                        "swap_vs_sync": ("swap", "sync")}.items():
        r = ir_of[a] / np.maximum(ir_of[b], 1e-9)
        out[key], out[f"{key}_min"], out[f"{key}_max"] = (float(np.median(r)), float(r.min()),
                                                          float(r.max()))
    grid = ranges_table()  # precomputed (seed 0), the same at every report
    for key, part in (("above", grid.R_V > grid.R_L), ("below", grid.R_V < grid.R_L),
                      ("diag", grid.R_V == grid.R_L)):
        out[f"grid_{key}"] = float(grid[part]["IR@1"].mean())
    for axis_name in ("R_V", "R_L"):
        means = grid.groupby(axis_name)["IR@1"].mean()
        for value, mean in means.items():
            out[f"grid_{axis_name}_{int(value)}"] = float(mean)  # type: ignore[call-overload]
    out["grid_min"], out["grid_max"] = float(grid["IR@1"].min()), float(grid["IR@1"].max())
    near = grid[(grid.R_V == _nearest(RANGE_GRID, out["R_V_fast"]))
                & (grid.R_L == _nearest(RANGE_GRID, out["R_L_fast"]))]
    out["grid_used_rv"], out["grid_used_rl"] = float(near.R_V.iloc[0]), float(near.R_L.iloc[0])
    out["grid_used"] = float(near["IR@1"].iloc[0])
    # the k-means coreset's ratio at the shipped stability table's seed blocks
    from iclr_lab.core.stability import load

    table = load("amd")
    km = [float(b["measured"]) for b in (table or {}).get("claims", {}).get("kmeans_coreset", [])]
    out["kmeans_blocks_min"] = min(km) if km else float("nan")
    out["kmeans_blocks_max"] = max(km) if km else float("nan")
    # the block where sync matching scored lowest against a random coreset, and async_gain there
    claims = (table or {}).get("claims", {})
    dvr = claims.get("distill_vs_random", [])
    if dvr:
        low = min(dvr, key=lambda b: float(b["measured"]))
        out["dvr_blocks_min"], out["dvr_min_seed"] = float(low["measured"]), float(low["seed"])
        at = [b for b in claims.get("async_gain", []) if b["block"] == low["block"]]
        out["async_gain_at_dvr_min"] = float(at[0]["measured"]) if at else float("nan")
    # how far the distilled caption vectors moved: the pairs of AMD's set whose nearest real
    # caption is still the caption it started from
    im = report.tables["images"]
    amd_set = im[im.set == AMD]
    caps = [amd_set[amd_set.stage == st].sort_values("pair").caption.to_numpy()
            for st in ("initial", "distilled")]
    out["captions_unchanged"] = float(np.sum(caps[0] == caps[1]))
    out["captions_total"] = float(len(caps[0]))
    best = grid.iloc[int(np.argmax(grid["IR@1"].to_numpy(float)))]
    out["grid_best"], out["grid_best_rv"], out["grid_best_rl"] = (
        float(best["IR@1"]), float(best.R_V), float(best.R_L))
    coreset_lr = rec[rec.kind == "coreset"]["lr"].to_numpy(float)
    out["coreset_lr_min"], out["coreset_lr_max"] = float(coreset_lr.min()), float(coreset_lr.max())
    return out
