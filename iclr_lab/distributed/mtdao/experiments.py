"""The MT-DAO chapter's experiments: ``reproduce()``, ``launch()``, claims, charts and explorer.

Every training run goes through :func:`~iclr_lab.distributed.mtdao.training.train_worker`, written
once against the :class:`~iclr_lab.core.collective.Collective` interface: ``reproduce`` runs it on
the thread simulator, :func:`launch` on whatever collective it is given (``iclr-lab launch mtdao``
passes it real ``torch.distributed`` processes).

* Experiment A (the theory, numpy): a Monte-Carlo check of the momentum-variance formula
  ``mtdao-eq-variance``.
* Experiment B (the claims): an MLP on scikit-learn's digits, the training set sorted by label and
  cut into one shard per worker. DDP, QH-DDP, Local Adam with three values of ``beta1`` and one
  MT-DAO configuration fixed in advance are each tuned over the same learning-rate grid on the
  first seed, then rerun at their best rate on the other seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from iclr_lab.core.collective import Collective, CommCounts, comm_seconds
from iclr_lab.core.report import Claim, Report, timed
from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.validation import check_int, check_range
from iclr_lab.distributed.mtdao.optimizer import DEFAULT_BETAS, DEFAULT_WEIGHTS, units_per_step
from iclr_lab.distributed.mtdao.stacked import train_stacked
from iclr_lab.distributed.mtdao.theory import anchor_share, update_weights, variance_check
from iclr_lab.distributed.mtdao.training import DigitsSetup, Method, model_bytes, train_worker

if TYPE_CHECKING:
    import altair as alt

__all__ = [
    "COLORS",
    "DDP",
    "LOCAL_ADAM",
    "LOCAL_ADAM_99",
    "LOCAL_ADAM_995",
    "LR_GRID",
    "METHODS",
    "MTDAO_NAME",
    "QH_DDP",
    "charts",
    "explorer",
    "impulse_chart",
    "launch",
    "methods",
    "numbers",
    "reproduce",
    "tuned_local_adam",
]

INF = math.inf

MTDAO_NAME = "MT-DAO"
DDP = "DDP"
QH_DDP = "QH-DDP"
LOCAL_ADAM = "Local Adam, β₁ = 0.9"
LOCAL_ADAM_99 = "Local Adam, β₁ = 0.99"
LOCAL_ADAM_995 = "Local Adam, β₁ = 0.995"
#: Experiment B's methods, the paper's first, in the order of tables and legends.
METHODS = (MTDAO_NAME, LOCAL_ADAM, LOCAL_ADAM_99, LOCAL_ADAM_995, DDP, QH_DDP)
#: Local Adam's three values of beta1: the tuned baseline is the best of them.
LOCAL_ADAMS = (LOCAL_ADAM, LOCAL_ADAM_99, LOCAL_ADAM_995)
#: One colour per method in every chart.
COLORS = {MTDAO_NAME: "#d62728", LOCAL_ADAM: "#1f77b4", LOCAL_ADAM_99: "#2ca02c",
          LOCAL_ADAM_995: "#9467bd", DDP: "#444444", QH_DDP: "#ff7f0e"}
#: The learning-rate grid every method is tuned over (log-spaced, half a decade apart).
LR_GRID = (0.01, 0.03, 0.1, 0.3)
#: One model-sized all-reduce takes as long as this many local steps in the simulated wall-clock.
COMM_STEPS = 1.0
#: Log-scale charts draw losses below this at this value (DDP's training loss falls to ~1e-10).
LOSS_FLOOR = 1e-4


def methods(lr: float, period: int) -> list[Method]:
    """Experiment B's six methods at peak learning rate ``lr``, the local ones averaging every
    state every ``period`` steps. MT-DAO's configuration (``beta = 0.995``, ``omega = 0.9``) was
    fixed before any run; QH-DDP is the same optimizer with gradients averaged every step."""
    period = check_int("period", period, 1)
    mt_betas, mt_weights = DEFAULT_BETAS, DEFAULT_WEIGHTS
    return [
        Method(MTDAO_NAME, lr, betas=mt_betas, weights=mt_weights, period=period),
        Method(LOCAL_ADAM, lr, betas=(0.9, 0.999), period=period),
        Method(LOCAL_ADAM_99, lr, betas=(0.99, 0.999), period=period),
        Method(LOCAL_ADAM_995, lr, betas=(0.995, 0.999), period=period),
        Method(DDP, lr, betas=(0.9, 0.999), period=INF, ddp=True),
        Method(QH_DDP, lr, betas=mt_betas, weights=mt_weights, period=INF, ddp=True),
    ]


# ---------------------------------------------------------------------------------------------
# sizes
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Sizes:
    workers: int
    period: int
    seeds: int
    grid: tuple[float, ...]
    setup: DigitsSetup
    chains: int
    mc_betas: tuple[float, ...]
    mc_periods: tuple[int, ...]


def _sizes(scale: str) -> _Sizes:
    book = DigitsSetup()
    return pick({
        "smoke": _Sizes(workers=2, period=4, seeds=1, grid=(0.01, 0.03, 0.1),
                        setup=replace(book, steps=32, warmup=2, eval_every=8), chains=2000,
                        mc_betas=(0.9, 0.99), mc_periods=(1, 8)),
        "book": _Sizes(workers=8, period=32, seeds=3, grid=LR_GRID, setup=book, chains=20_000,
                       mc_betas=(0.9, 0.99, 0.999), mc_periods=(1, 8, 32, 128)),
        "paper": _Sizes(workers=8, period=32, seeds=5, grid=LR_GRID,
                        setup=replace(book, steps=1536, warmup=48), chains=100_000,
                        mc_betas=(0.9, 0.99, 0.999), mc_periods=(1, 8, 32, 128)),
    }, scale)


def _run_stacked(runs: list[tuple[Method, int]], size: _Sizes, desc: str) -> list[pd.DataFrame]:
    """``_run`` for every run ``(method, seed)``, all of them in one stacked pass
    (:func:`~iclr_lab.distributed.mtdao.stacked.train_stacked`): the same tables, bit for bit."""
    tables = train_stacked(runs, size.setup, size.workers, desc=desc)
    return [t.assign(seed=s, lr=m.lr) for (m, s), t in zip(runs, tables, strict=True)]


def launch(comm: Collective, scale: str = "book", seed: int = 0) -> dict[str, pd.DataFrame]:
    """Experiment B's six methods at the middle learning rate of the grid (one seed) on the workers
    of ``comm``: the function that ``iclr-lab launch mtdao`` runs on real ``torch.distributed``
    processes.

    Every process calls it with its own collective; the shards follow ``comm.world_size``. The
    tables have the columns of :func:`reproduce`'s (``curves``: one row per method and evaluation;
    ``final``: one row per method), so a real run and the simulator compare number for number.
    """
    size = _sizes(scale)
    lr = size.grid[len(size.grid) // 2]
    logs = [train_worker(comm, m, size.setup, seed).assign(seed=seed, lr=lr)
            for m in methods(lr, size.period)]
    if comm.rank != 0:
        return {"curves": pd.DataFrame(), "final": pd.DataFrame()}
    curves = pd.concat(logs, ignore_index=True)
    return {"curves": curves, "final": _final_rows(curves)}


def _final_rows(curves: pd.DataFrame) -> pd.DataFrame:
    last = curves.loc[curves.groupby(["method", "seed", "lr"], sort=False)["step"].idxmax()]
    # the mean pseudo-gradient cosine over the run's rounds (NaN for DDP)
    align = curves.groupby(["method", "seed", "lr"], sort=False)["alignment"].mean()
    final = last.rename(columns={"loss": "final_loss"}).set_index(["method", "seed", "lr"])
    final["alignment"] = align
    cols = ["final_loss", "test_acc", "alignment", "bytes", "rounds", "bytes_parameters",
            "bytes_gradients", "bytes_first_moment", "bytes_second_moment"]
    return final[cols].reset_index()


# ---------------------------------------------------------------------------------------------
# reproduce
# ---------------------------------------------------------------------------------------------

def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Run Experiments A and B at ``scale`` (seeds ``seed, seed+1, ...``); return the report.

    The learning rate of every method is tuned over the same grid on seed ``seed`` alone; the
    other seeds rerun each method at its best rate. Claims: the variance formula
    (``mtdao-eq-variance``), the byte count (``mtdao-eq-cost``), that Local Adam has a gap to DDP
    worth closing with interior best rates, and that MT-DAO halves the gap of Local Adam with a
    tuned ``beta1``.
    """
    size = _sizes(scale)
    rng = seed_everything(seed)
    del rng  # every random source below derives from the seeds themselves
    seeds = [seed + i for i in range(size.seeds)]
    with timed() as elapsed:
        variance = variance_check(size.mc_betas, size.mc_periods, chains=size.chains, seed=seed)
        # Every worker of many runs in one stacked pass, equal bit for bit to
        # run_simulated(train_worker) per run (stacked.py; tests/distributed/test_mtdao_stacked.py):
        # first every method at every rate of the grid on the tuning seed, then the other seeds.
        jobs = [(m, seed) for lr in size.grid for m in methods(lr, size.period)]
        tune_logs = _run_stacked(jobs, size, "mtdao: tuning")
        tune_curves = pd.concat(tune_logs, ignore_index=True)
        tuning = _final_rows(tune_curves)
        best = tuning.loc[tuning.groupby("method", sort=False)["final_loss"].idxmin()]
        best_lr = dict(zip(best["method"], best["lr"], strict=True))
        reruns = [(s, replace(m, lr=best_lr[m.name]))
                  for s in seeds[1:] for m in methods(size.grid[0], size.period)]
        more = _run_stacked([(m, s) for s, m in reruns], size, "mtdao: seeds") if reruns else []
        chosen = tune_curves[tune_curves["lr"] == tune_curves["method"].map(best_lr)]
        curves = pd.concat([chosen, *more], ignore_index=True)
        tables = _tables(curves, tuning, variance, size)
        claims, tables["acceptance"] = _claims(tables, size)
    return Report("mtdao", scale, seed, tables, claims, seconds=elapsed(), chart_builder=charts)


def _tables(curves: pd.DataFrame, tuning: pd.DataFrame, variance: pd.DataFrame,
            size: _Sizes) -> dict[str, pd.DataFrame]:
    payload = model_bytes(size.setup.hidden)
    # bandwidth at which one model-sized ring all-reduce takes COMM_STEPS local steps
    bandwidth = 2 * (size.workers - 1) / size.workers * payload / COMM_STEPS
    curves = curves.copy()
    counts = [CommCounts({"parameters": int(b)}, {"parameters": int(r)})
              for b, r in zip(curves["bytes"], curves["rounds"], strict=True)]
    curves["sim_time"] = curves["step"] + [comm_seconds(c, size.workers, bandwidth=bandwidth)
                                           for c in counts]
    curves["units"] = curves["bytes"] / payload
    final = _final_rows(curves)
    ddp = final[final["method"] == DDP].set_index("seed")["final_loss"]
    final["gap"] = final["final_loss"] - final["seed"].map(ddp)
    final["units_per_step"] = final["bytes"] / payload / size.setup.steps
    best = tuning.groupby("method")["final_loss"].transform("min")
    tuning = tuning.assign(best=tuning["final_loss"] == best)
    keep = ["method", "seed", "lr", "step", "loss", "test_acc", "alignment", "units", "sim_time"]
    return {"curves": curves[keep].reset_index(drop=True), "final": final,
            "tuning": tuning[["method", "seed", "lr", "final_loss", "test_acc", "best"]],
            "variance": variance}


def tuned_local_adam(tuning: pd.DataFrame) -> str:
    """The Local Adam variant (one ``beta1``) with the lowest final loss on the tuning seed, each at
    its best learning rate: the tuned baseline."""
    la = tuning[tuning["method"].isin(LOCAL_ADAMS)]
    return str(la["method"].to_numpy()[int(np.argmin(la["final_loss"].to_numpy()))])


def _claims(tables: dict[str, pd.DataFrame], size: _Sizes) -> tuple[list[Claim], pd.DataFrame]:
    final, tuning, variance = tables["final"], tables["tuning"], tables["variance"]
    steps, k = size.setup.steps, size.period
    gap = {m: final[final["method"] == m].set_index("seed")["gap"].sort_index() for m in METHODS}
    strongest = tuned_local_adam(tuning)
    ratio = gap[MTDAO_NAME] / gap[strongest]
    naive = gap[strongest] / gap[LOCAL_ADAM]
    mt_vs_plain = gap[MTDAO_NAME] / gap[LOCAL_ADAM]

    mt_bytes = float(final[final["method"] == MTDAO_NAME][
        ["bytes_parameters", "bytes_first_moment", "bytes_second_moment"]].iloc[0].sum())
    la_bytes = float(final[final["method"] == LOCAL_ADAM][
        ["bytes_parameters", "bytes_first_moment", "bytes_second_moment"]].iloc[0].sum())
    ddp_bytes = float(final[final["method"] == DDP]["bytes_gradients"].iloc[0])
    byte_ratio = mt_bytes / ddp_bytes if mt_bytes == la_bytes else math.nan
    expected_ratio = units_per_step((k, k, k))

    # which methods' best rates sit on an edge of the grid (the gap is only meaningful if not)
    judged = [m for m in METHODS if m != QH_DDP]
    best = tuning[tuning["best"] & tuning["method"].isin(judged)]
    edges = best[best["lr"].isin([min(size.grid), max(size.grid)])]["method"].tolist()

    claims = [
        Claim("variance_formula",
              f"A momentum restarted from the synchronised value has, after K local steps, the "
              f"variance (1-β)/(1+β)(1-β^(2K))σ² (mtdao-eq-variance): the largest relative error "
              f"of {size.chains:,} simulated chains over β ∈ {list(size.mc_betas)} and "
              f"K ∈ {list(size.mc_periods)} is ≤ 5%.",
              float(variance["rel_error"].max()), 0.05, "<=",
              paper="the variance of a momentum K steps after synchronisation (used to motivate "
                    "slow momenta)",
              kind="derivation", source="prior"),
        Claim("bytes_counted",
              f"Counted by the collective over T = {steps} steps, MT-DAO with one first moment and "
              f"every state averaged every K = {k} steps sends exactly the bytes of Local Adam, "
              f"3/K = {expected_ratio:.4g} of DDP's (mtdao-eq-cost).",
              byte_ratio, (expected_ratio, expected_ratio), "in",
              paper="about 10x less communication than DDP (3/32 of its bytes at K = 32)",
              kind="derivation", source="prior"),
        Claim.over_seeds("gap_exists",
                         f"Local Adam (β₁ = 0.9, K = {k}) ends ≥ 0.02 nats of training loss above "
                         "DDP (median over seeds): there is a gap to close.",
                         gap[LOCAL_ADAM].tolist(), 0.02, ">=",
                         paper="local adaptive methods trail DDP at the same number of tokens",
                         expected=False, kind="sanity", source="prior"),
        Claim("rates_interior",
              "Every method's best learning rate is interior to the grid "
              f"{list(size.grid)} (counted: methods whose best rate is on an edge; must be 0)"
              + (f" [on an edge: {', '.join(edges)}]" if edges else "") + ".",
              float(len(edges)), 0.0, "<=",
              paper="(a condition for the comparison, not a result of the paper)",
              expected=False, kind="sanity", source="prior"),
        Claim.over_seeds("mtdao_closes_gap",
                         f"MT-DAO (β = 0.995, ω = 0.9, fixed in advance) ends with a gap to DDP ≤ "
                         f"0.5x that of Local Adam with β₁ tuned over {{0.9, 0.99, 0.995}} on the "
                         f"same learning-rate grid (here: {strongest}); median over seeds of the "
                         "ratio of gaps.",
                         ratio.tolist(), 0.5, "<=",
                         paper="MT-DAO closes the gap to DDP; 24% fewer steps to the target "
                               "perplexity at 720M parameters",
                         expected=False, kind="paper", source="prior"),
    ]
    rows = []
    for s in ratio.index:
        rows.append({"seed": int(s), "gap, MT-DAO": gap[MTDAO_NAME][s],
                     f"gap, {strongest} (tuned)": gap[strongest][s],
                     f"gap, {LOCAL_ADAM}": gap[LOCAL_ADAM][s],
                     "MT-DAO / tuned Local Adam (≤ 0.5?)": ratio[s],
                     "MT-DAO / Local Adam β₁ = 0.9": mt_vs_plain[s],
                     "tuned / Local Adam β₁ = 0.9": naive[s]})
    return claims, pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# numbers for the prose
# ---------------------------------------------------------------------------------------------

_KEYS = {MTDAO_NAME: "mt", LOCAL_ADAM: "la", LOCAL_ADAM_99: "la99", LOCAL_ADAM_995: "la995",
         DDP: "ddp", QH_DDP: "qhddp"}


def numbers(report: Report) -> dict[str, Any]:
    """Every number (and name) the chapter's prose quotes that is not a claim's value, computed
    from ``report.tables`` (medians over seeds). The chapter glues them."""
    t = report.tables
    final, tuning = t["final"], t["tuning"]
    cols = ["final_loss", "gap", "test_acc", "alignment", "units_per_step"]
    med = {c: final.groupby("method")[c].median().to_dict() for c in cols}
    best = tuning[tuning["best"]].set_index("method")["lr"].to_dict()
    out: dict[str, Any] = {}
    for method, key in _KEYS.items():
        out[f"loss_{key}"] = float(med["final_loss"][method])
        out[f"gap_{key}"] = float(med["gap"][method])
        out[f"acc_{key}"] = 100 * float(med["test_acc"][method])
        out[f"units_{key}"] = float(med["units_per_step"][method])
        out[f"lr_{key}"] = float(best[method])
        if method not in (DDP, QH_DDP):
            out[f"align_{key}"] = float(med["alignment"][method])
    out["strongest"] = tuned_local_adam(tuning)
    acc = t["acceptance"]
    out["mt_over_la"] = float(acc["MT-DAO / Local Adam β₁ = 0.9"].median())
    out["tuned_over_la"] = float(acc["tuned / Local Adam β₁ = 0.9"].median())
    out["seeds"] = int(final["seed"].nunique())
    out["anchor_adam"] = anchor_share((0.9,), (1.0,), 32)
    out["anchor_adam99"] = anchor_share((0.99,), (1.0,), 32)
    out["anchor_mt"] = anchor_share(DEFAULT_BETAS[:1], DEFAULT_WEIGHTS, 32)
    out["beta_k_adam"] = 0.9**32
    out["half_life_mt"] = math.log(0.5) / math.log(DEFAULT_BETAS[0])
    out["half_life_adam"] = math.log(0.5) / math.log(0.9)
    out["ddp_over_mt_units"] = 1.0 / units_per_step((32, 32, 32))
    return out


# ---------------------------------------------------------------------------------------------
# charts and the explorer
# ---------------------------------------------------------------------------------------------

def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """The chapter's figures, built from ``report.tables``."""
    import altair as alt

    from iclr_lab.core.charts import curves, palette, sweep, thin

    t = report.tables
    final, cur = t["final"], t["curves"]
    order = [m for m in METHODS if m in set(final["method"])]
    scale = palette(order, MTDAO_NAME, colors=COLORS)
    color = alt.Color("method:N", scale=scale, title="method", sort=order)
    figs: dict[str, alt.TopLevelMixin] = {}

    # the main figure: each method's gap to DDP, one dot per seed, a tick at the median
    gaps = final[final["method"] != DDP]
    shown = [m for m in order if m != DDP]
    color_gap = alt.Color("method:N", scale=palette(shown, MTDAO_NAME, colors=COLORS),
                          title="method", sort=shown)
    med = gaps.groupby("method", as_index=False)["gap"].median()
    y_gap = alt.Y("gap:Q", title="final loss − DDP's (nats)")
    x_m = alt.X("method:N", sort=shown, title=None, axis=alt.Axis(labelAngle=-20))
    dots = alt.Chart(gaps).mark_point(filled=True, size=55, opacity=0.8).encode(
        x=x_m, y=y_gap, color=color_gap,
        tooltip=["method", "seed", "lr", alt.Tooltip("gap:Q", format=".4f")])
    ticks = alt.Chart(med).mark_tick(thickness=3, size=30).encode(x=x_m, y=y_gap, color=color_gap)
    strongest = tuned_local_adam(t["tuning"])
    half = 0.5 * float(med.set_index("method").loc[strongest, "gap"])
    rule_df = pd.DataFrame({"gap": [half, 0.0],
                            "what": [f"half of {strongest}'s gap", "DDP"]})
    rule = alt.Chart(rule_df).mark_rule(strokeDash=[6, 4], color="black").encode(
        y="gap:Q", tooltip=["what", alt.Tooltip("gap:Q", format=".4f")])
    label = alt.Chart(rule_df.iloc[:1]).mark_text(align="right", dy=-6, fontSize=11).encode(
        y="gap:Q", x=alt.value(436), text="what:N")
    figs["gaps"] = alt.layer(rule, label, ticks, dots).properties(
        width=440, height=260, title="Gap to DDP at the end of training (dots: seeds)")

    # the learning-rate grid on the tuning seed
    # not floored: DDP's fall to ~1e-10 as the rate grows is the memorisation the text describes
    tun = t["tuning"].assign(final_loss=lambda d: d["final_loss"].clip(lower=1e-15))
    x_lr = alt.X("lr:Q", scale=alt.Scale(type="log", domain=[min(tun["lr"]) / 1.3,
                                                             max(tun["lr"]) * 1.3], nice=False),
                 title="peak learning rate")
    y_l = alt.Y("final_loss:Q", scale=alt.Scale(type="log"), title="final training loss",
                axis=alt.Axis(format=".0e"))
    lines = alt.Chart(tun).mark_line(point=True).encode(
        x=x_lr, y=y_l, color=color,
        tooltip=["method", "lr", alt.Tooltip("final_loss:Q", format=".4g")])
    bests = alt.Chart(tun[tun["best"]]).mark_point(size=220, shape="circle", strokeWidth=2).encode(
        x=x_lr, y=y_l, color=color)
    figs["tuning"] = alt.layer(lines, bests).properties(
        width=440, height=260, title=f"Tuning on seed {int(tun['seed'].iloc[0])} (circled: best rate)")

    cur = cur.assign(loss=cur["loss"].clip(lower=LOSS_FLOOR))
    y_floor = f"training loss (below {LOSS_FLOOR:g}: drawn at it)"
    local = cur[cur["units"] > 0]
    figs["loss_vs_bytes"] = curves(
        thin(local, "units", 80, log=True), x="units", y="loss", color="method", log_x=True,
        log_y=True, x_title="model-sized all-reduces so far (per worker)", y_title=y_floor,
        highlight=MTDAO_NAME, color_title="method", colors=COLORS,
        title="Loss against communication")
    figs["loss_vs_time"] = curves(
        cur, x="sim_time", y="loss", color="method", log_y=True,
        x_title=f"simulated time (local steps; one all-reduce = {COMM_STEPS:g} step)",
        y_title=y_floor, highlight=MTDAO_NAME, color_title="method", colors=COLORS,
        title="Loss against simulated wall-clock")

    # Experiment A: simulated variance against the formula
    var = t["variance"].assign(beta=lambda d: d["beta"].map(lambda b: f"β = {b:g}"))
    x_k = alt.X("K:Q", scale=alt.Scale(type="log", domain=[0.8, float(var["K"].max()) * 1.25],
                                        nice=False), title="local steps since the average, K")
    y_scale = alt.Scale(type="log")
    y_v = alt.Y("formula:Q", scale=y_scale, title="variance of the momentum (σ = 1)",
                axis=alt.Axis(format=".0e"))
    beta_names = sorted(var["beta"].unique())
    bcol = alt.Color("beta:N", title="momentum", scale=palette(beta_names, beta_names))
    formula = alt.Chart(var).mark_line().encode(x=x_k, y=y_v, color=bcol)
    sim = alt.Chart(var).mark_point(filled=True, size=60).encode(
        x=x_k, y=alt.Y("empirical:Q", scale=y_scale), color=bcol,
        tooltip=["beta", "K", alt.Tooltip("empirical:Q", format=".4g"),
                 alt.Tooltip("formula:Q", format=".4g"), alt.Tooltip("rel_error:Q", format=".2%")])
    figs["variance"] = alt.layer(formula, sim).properties(
        width=440, height=240, title="Monte Carlo (dots) against the formula (lines)")

    # the weight of the synchronised momentum k steps into a round, with a slider over K
    rows = []
    for k_period in (4, 8, 16, 32, 64, 128):
        steps = np.arange(1, k_period + 1)
        for name, betas, weights in ((LOCAL_ADAM, (0.9,), (1.0,)), (LOCAL_ADAM_99, (0.99,), (1.0,)),
                                     (MTDAO_NAME, DEFAULT_BETAS[:1], DEFAULT_WEIGHTS)):
            w = sum(om * b**steps for b, om in zip(betas, weights, strict=True))
            rows.append(pd.DataFrame({"K": k_period, "k": steps, "method": name, "anchor": w}))
    anchor = pd.concat(rows, ignore_index=True)
    figs["anchor_slider"] = sweep(
        anchor, x="k", y="anchor", param="K", color="method", param_label="K", start=32,
        x_title="local steps since the last average, k",
        y_title="weight of the averaged momentum", highlight=MTDAO_NAME, colors=COLORS,
        color_title="optimizer", title="How much of the shared direction survives a round")
    return figs


def impulse_chart(beta: float = 0.995, omega: float = 0.9, period: int = 32,
                  beta_adam: float = 0.9) -> alt.TopLevelMixin:
    """The weight that one update puts on the gradient of ``k`` steps ago (``mtdao-eq-impulse``),
    for MT-DAO with one momentum ``(beta, omega)`` and for Adam's first moment ``beta_adam``, over
    two sync periods; the title gives the share of a round's updates that still comes from the
    averaged momentum (``mtdao-eq-anchor``). The chapter's explorer."""
    import altair as alt

    from iclr_lab.core.charts import palette

    beta = check_range("beta", beta, 0, 1, high_open=True)
    omega = check_range("omega", omega, 0, 1)
    period = check_int("period", round(period), 1)
    beta_adam = check_range("beta_adam", beta_adam, 0, 1, high_open=True)
    lags = 2 * period
    names = [f"{MTDAO_NAME} (β = {beta:g}, ω = {omega:g})", f"Adam (β₁ = {beta_adam:g})"]
    w_mt = update_weights((beta,), (omega,), lags)
    w_adam = update_weights((beta_adam,), (1.0,), lags)
    k = np.arange(lags)
    floor = 1e-6  # a log axis: weights below this are drawn at it
    df = pd.concat([pd.DataFrame({"lag": k, "weight": np.maximum(w, floor), "optimizer": n})
                    for w, n in ((w_mt, names[0]), (w_adam, names[1]))], ignore_index=True)
    share_mt = anchor_share((beta,), (omega,), period)
    share_adam = anchor_share((beta_adam,), (1.0,), period)
    lines = alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=alt.X("lag:Q", title="gradient from k steps ago"),
        y=alt.Y("weight:Q", scale=alt.Scale(type="log", domain=[floor, 1]),
                title="weight in this update"),
        color=alt.Color("optimizer:N", scale=palette(names, names[0]), title=None),
        tooltip=["optimizer", "lag", alt.Tooltip("weight:Q", format=".3g")])
    rule = alt.Chart(pd.DataFrame({"lag": [period]})).mark_rule(strokeDash=[6, 4]).encode(x="lag:Q")
    title = (f"Share of a round from the averaged momentum: MT-DAO {share_mt:.2f}, "
             f"Adam {share_adam:.2f} (dashed: K = {period})")
    return alt.layer(lines, rule).properties(width=440, height=240, title=title)


def explorer() -> Any:
    """An ipywidgets explorer of :func:`impulse_chart`: the slow momentum's ``beta``, its weight
    ``omega``, the sync period ``K`` and Adam's ``beta1``."""
    from iclr_lab.core.widgets import explorer as make_explorer
    from iclr_lab.core.widgets import log_slider, slider

    return make_explorer(
        impulse_chart,
        beta=slider("β (MT-DAO)", 0.995, 0.5, 0.999, 0.001),
        omega=slider("ω", 0.9, 0.0, 1.0, 0.05),
        period=log_slider("K (period)", 32, 1, 256, steps_per_decade=10),
        beta_adam=slider("β₁ (Adam)", 0.9, 0.0, 0.99, 0.01),
    )
