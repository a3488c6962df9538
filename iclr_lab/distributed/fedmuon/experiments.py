"""The FedMuon chapter's experiments: the convex toy of Theorem 1 (A), the Newton-Schulz ablation on
the toy (A'), and federated digits under Dirichlet label skew (B); claims, charts and explorer."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from iclr_lab.core.collective import Collective, run_simulated
from iclr_lab.core.progress import progress
from iclr_lab.core.report import Claim, Report, timed
from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.validation import check_int
from iclr_lab.distributed.fedmuon.method import KELLER, toy_matrix, toy_run
from iclr_lab.distributed.fedmuon.training import FedMethod, FedSetup, model_bytes, train_clients

if TYPE_CHECKING:
    import altair as alt

__all__ = ["COLORS", "FEDMUON", "charts", "explorer", "launch", "methods", "ns_map", "ns_map_chart",
           "numbers", "reproduce"]

FEDMUON, LOCALMUON, CARRY, SCAFFOLD = "FedMuon", "LocalMuon", "LocalMuon (carried momentum)", "SCAFFOLD-SGDM"
#: One colour per method across every chart of the chapter.
COLORS: dict[str, str] = {FEDMUON: "#d62728", LOCALMUON: "#4c78a8", CARRY: "#9ecae9",
                          SCAFFOLD: "#72a17b"}
#: The Dirichlet concentrations of experiment B: heterogeneous and near-IID.
ALPHAS: tuple[float, float] = (0.1, 10.0)
#: Newton-Schulz counts of the ablation (``None``: exact SVD).
NS_COUNTS: tuple[int, ...] = (0, 1, 2, 5)


@dataclass(frozen=True)
class _Sizes:
    toy_rounds: int
    toy_seeds: int
    setup: FedSetup
    lmo_grid: tuple[float, ...]
    sgd_grid: tuple[float, ...]


def _sizes(scale: str) -> _Sizes:
    return pick({
        "smoke": _Sizes(20, 2, FedSetup(rounds=3, eval_every=1), (0.03,), (0.01,)),
        "book": _Sizes(300, 5, FedSetup(rounds=30), (0.01, 0.03, 0.1), (0.01, 0.03, 0.1)),
        "paper": _Sizes(1000, 10, FedSetup(rounds=150), (0.01, 0.03, 0.1), (0.01, 0.03, 0.1)),
    }, scale)


def methods(lr_lmo: float, lr_sgd: float) -> list[FedMethod]:
    """The four methods of experiment B: FedMuon, LocalMuon (momentum reset each round and carried
    across rounds) at LMO step ``lr_lmo``, and SCAFFOLD with local heavy-ball momentum at ``lr_sgd``.
    All LMO methods use ``alpha = 0.5`` and five Newton-Schulz iterations."""
    return [FedMethod(FEDMUON, "fedmuon", lr_lmo), FedMethod(LOCALMUON, "localmuon", lr_lmo),
            FedMethod(CARRY, "localmuon", lr_lmo, carry=True), FedMethod(SCAFFOLD, "scaffold", lr_sgd)]


def _run(method: FedMethod, setup: FedSetup, seed: int, workers: int = 1) -> pd.DataFrame:
    logs = run_simulated(lambda comm: train_clients(comm, method, setup, seed), workers)
    return logs[0].assign(lr=method.lr, dirichlet=setup.dirichlet, seed=seed)


def launch(comm: Collective, scale: str = "book", seed: int = 0) -> dict[str, pd.DataFrame]:
    """Experiment B's four methods at the middle of their grids, Dirichlet 0.1, on the workers of
    ``comm``: what ``iclr-lab launch fedmuon`` runs on real ``torch.distributed`` processes. The
    clients are spread over the ranks; the ``final`` table has one row per method with its
    ``final_loss``."""
    size = _sizes(scale)
    lmo, sgd = size.lmo_grid[len(size.lmo_grid) // 2], size.sgd_grid[len(size.sgd_grid) // 2]
    logs = [train_clients(comm, m, size.setup, seed).assign(lr=m.lr, dirichlet=size.setup.dirichlet,
                                                            seed=seed)
            for m in methods(lmo, sgd)]
    if comm.rank != 0:
        return {"curves": pd.DataFrame(), "final": pd.DataFrame()}
    curves = pd.concat(logs, ignore_index=True)
    return {"curves": curves, "final": _final(curves)}


def _final(curves: pd.DataFrame) -> pd.DataFrame:
    last = curves.loc[curves.groupby(["method", "dirichlet", "lr"], sort=False)["round"].idxmax()]
    return last.rename(columns={"loss": "final_loss"})[
        ["method", "dirichlet", "lr", "final_loss", "test_acc", "bytes"]].reset_index(drop=True)


def ns_map(steps: int, coefficients: tuple[float, float, float] = KELLER, points: int = 200) -> pd.DataFrame:
    """The scalar map ``sigma -> p_T(sigma)`` that ``T`` Newton-Schulz iterations
    (``fedmuon-eq-ns``) apply to each singular value of the Frobenius-normalised input, on
    ``sigma`` in (0, 1]; columns ``sigma``, ``output``, ``T``."""
    steps = check_int("steps", steps, 0)
    a, b, c = coefficients
    s = np.linspace(1e-3, 1.0, points)
    y = s.copy()
    for _ in range(steps):
        y = a * y + b * y**3 + c * y**5
    return pd.DataFrame({"sigma": s, "output": y, "T": steps})


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Run experiments A, A' and B at ``scale`` with seed ``seed``; return the report.

    A: the two-client toy of ``fedmuon-eq-toy`` with exact gradients and with gradient noise
    (seeds ``seed, seed+1, ...``). A': FedMuon on the toy with T in {0, 1, 2, 5} Newton-Schulz
    iterations. B: federated digits, 16 clients, 8 sampled per round, 5 local steps, at Dirichlet
    0.1 and 10; each method's step size is tuned over a grid of three at Dirichlet 0.1 on ``seed``
    and reused at Dirichlet 10.
    """
    size = _sizes(scale)
    seed_everything(seed)
    with timed() as elapsed:
        toy = _toy_tables(size, seed)
        setup = replace(size.setup, dirichlet=ALPHAS[0])
        # the carried-momentum variant is not tuned: it reuses LocalMuon's step (a variant shown
        # beside it, not a competitor), which keeps the chapter inside its time budget
        jobs = [m for lr, lr_s in zip(size.lmo_grid, size.sgd_grid, strict=True)
                for m in methods(lr, lr_s) if m.name != CARRY]
        tune = pd.concat([_run(m, setup, seed) for m in progress(jobs, desc="fedmuon: tuning")],
                         ignore_index=True)
        tuning = _final(tune)
        best = tuning.loc[tuning.groupby("method", sort=False)["final_loss"].idxmin()]
        best_lr = dict(zip(best["method"], best["lr"], strict=True))
        best_lr[CARRY] = best_lr[LOCALMUON]
        carry = [_run(replace(m, lr=best_lr[CARRY]), setup, seed)
                 for m in methods(size.lmo_grid[0], size.sgd_grid[0]) if m.name == CARRY]
        near_iid = replace(size.setup, dirichlet=ALPHAS[1])
        others = [replace(m, lr=best_lr[m.name]) for m in methods(size.lmo_grid[0], size.sgd_grid[0])]
        more = [_run(m, near_iid, seed) for m in progress(others, desc="fedmuon: near-IID")]
        chosen = tune[tune["lr"] == tune["method"].map(best_lr)]
        curves = pd.concat([chosen, *carry, *more], ignore_index=True)
        payload = model_bytes(size.setup)
        curves["uploads"] = curves["bytes"] / payload
        final = _final(curves)
        tables = {**toy, "curves": curves.drop(columns=["bytes"]), "final": final, "tuning": tuning,
                  "ns_map": pd.concat([ns_map(t) for t in range(9)], ignore_index=True)}
        claims = _claims(tables)
    return Report("fedmuon", scale, seed, tables, claims, seconds=elapsed(), chart_builder=charts)


def _toy_tables(size: _Sizes, seed: int) -> dict[str, pd.DataFrame]:
    A = toy_matrix(8, seed)
    rows = []
    runs = [(m, 0.0, seed, None) for m in ("localmuon", "localmuon_carry", "fedmuon")]
    runs += [(m, 0.1, s, None) for m in ("localmuon", "fedmuon") for s in range(seed, seed + size.toy_seeds)]
    names = {"localmuon": LOCALMUON, "localmuon_carry": CARRY, "fedmuon": FEDMUON}
    for m, noise, s, _ in runs:
        g = toy_run(m, A, rounds=size.toy_rounds, noise=noise, seed=s).numpy()
        rows.append(pd.DataFrame({"round": np.arange(len(g)), "ratio": g / g[0], "method": names[m],
                                  "noise": noise, "seed": s}))
    ns = []
    for t in (*NS_COUNTS, None):
        g = toy_run("fedmuon", A, rounds=size.toy_rounds, ns_steps=t).numpy()
        ns.append(pd.DataFrame({"round": np.arange(len(g)), "ratio": g / g[0],
                                "T": "exact (SVD)" if t is None else f"T = {t}"}))
    return {"toy": pd.concat(rows, ignore_index=True), "toy_ns": pd.concat(ns, ignore_index=True)}


def _claims(t: dict[str, pd.DataFrame]) -> list[Claim]:
    toy = t["toy"]
    last = toy.loc[toy.groupby(["method", "noise", "seed"])["round"].idxmax()]

    def end(method: str, noise: float) -> list[float]:
        sel = last[(last["method"] == method) & (last["noise"] == noise)].sort_values("seed")
        return [float(v) for v in sel["ratio"]]

    ns = t["toy_ns"]
    ns_last = ns.loc[ns.groupby("T")["round"].idxmax()]
    ns_worst = float(ns_last[ns_last["T"] != "exact (SVD)"]["ratio"].max())
    fin = t["final"].set_index(["method", "dirichlet"])["final_loss"]
    gap = {a: float(fin[(LOCALMUON, a)] - fin[(FEDMUON, a)]) for a in ALPHAS}
    ratio = gap[ALPHAS[0]] / gap[ALPHAS[1]] if gap[ALPHAS[1]] > 0 else (
        float("inf") if gap[ALPHAS[0]] > 0 else 0.0)
    vs_scaffold = float(fin[(FEDMUON, ALPHAS[0])] / fin[(SCAFFOLD, ALPHAS[0])])
    return [
        Claim("toy_fedmuon", "On the convex two-client toy with exact gradients, FedMuon's "
              "||grad f||_F ends at <= 0.05 of its start (exact LMO).", end(FEDMUON, 0.0)[0], 0.05,
              "<=", "Theorem 1: FedMuon converges where LocalMuon cannot", kind="theorem"),
        Claim("toy_localmuon_stuck", "On the same toy LocalMuon's ||grad f||_F stays >= 0.9 of its "
              "start (exactly 1 by the clients' symmetry, unless the implementation breaks it).",
              end(LOCALMUON, 0.0)[0], 0.9, ">=", "Theorem 1: LocalMuon stays at X^0", kind="theorem"),
        Claim.over_seeds("toy_noise_fedmuon", "With gradient noise (std 0.1), FedMuon still ends at "
                         "<= 0.05 of its start.", end(FEDMUON, 0.1), 0.05, "<=",
                         "Theorem 2 (stochastic gradients)", kind="theorem"),
        Claim.over_seeds("toy_noise_localmuon", "With gradient noise (std 0.1), LocalMuon stays "
                         ">= 0.5 of its start.", end(LOCALMUON, 0.1), 0.5, ">=",
                         "Theorem 1", kind="theorem"),
        Claim("toy_any_ns", "FedMuon with T in {0, 1, 2, 5} Newton-Schulz iterations ends at <= 0.05 "
              "of its start on the toy (the worst T is reported).", ns_worst, 0.05, "<=",
              "Theorem 3: convergence for every T >= 0", kind="theorem"),
        Claim("heterogeneity", "LocalMuon's final training loss minus FedMuon's is >= 3x larger at "
              "Dirichlet 0.1 than at Dirichlet 10 (ratio of the two gaps).", ratio, 3.0, ">=",
              "LocalMuon lags under heterogeneity and is competitive on near-IID data"),
        Claim("vs_scaffold", "At Dirichlet 0.1, FedMuon's final training loss is at most that of "
              "SCAFFOLD-SGDM, each at its tuned step (ratio FedMuon / SCAFFOLD).", vs_scaffold, 1.0,
              "<=", "FedMuon has the best accuracy in every setting"),
    ]


def numbers(report: Report) -> dict[str, Any]:
    """Numbers the chapter's prose quotes, computed from ``report``'s tables (for ``glue_report``):
    final losses and accuracies per method and Dirichlet concentration, the two LocalMuon gaps and
    the tuned step sizes."""
    fin = report.tables["final"]
    out: dict[str, Any] = {}
    keys = {FEDMUON: "fedmuon", LOCALMUON: "localmuon", CARRY: "carry", SCAFFOLD: "scaffold"}
    for method, dirichlet, lr, loss, acc in zip(fin["method"], fin["dirichlet"], fin["lr"],
                                                fin["final_loss"], fin["test_acc"], strict=True):
        tag = f"{keys[str(method)]}_{'het' if dirichlet == ALPHAS[0] else 'iid'}"
        out[f"loss_{tag}"] = float(loss)
        out[f"acc_{tag}"] = float(acc)
        out[f"lr_{keys[str(method)]}"] = float(lr)
    grid = sorted(report.tables["tuning"]["lr"].unique())
    out["edge_count"] = float(sum(out[f"lr_{k}"] == grid[-1] for k in ("fedmuon", "localmuon", "scaffold")))
    for tag in ("het", "iid"):
        out[f"gap_{tag}"] = out[f"loss_localmuon_{tag}"] - out[f"loss_fedmuon_{tag}"]
        out[f"gap_carry_{tag}"] = out[f"loss_carry_{tag}"] - out[f"loss_fedmuon_{tag}"]
    return out


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """The chapter's charts: ``toy`` (experiment A), ``toy_ns`` (A'), ``digits`` (B: loss against
    rounds, a slider over the Dirichlet concentration), ``uploads`` (B: loss against uploaded
    model copies at Dirichlet 0.1) and ``ns_map`` (the Newton-Schulz scalar map, a slider over T)."""
    from iclr_lab.core.charts import curves, sweep

    t = report.tables
    toy = t["toy"].assign(series=lambda d: d["method"] + np.where(d["noise"] > 0, " (noise 0.1)", ""))
    toy = toy[toy["round"] % 3 == 0]
    toy_colors = {**COLORS, f"{FEDMUON} (noise 0.1)": "#ff7f0e", f"{LOCALMUON} (noise 0.1)": "#8c8c8c"}
    ns = t["toy_ns"][t["toy_ns"]["round"] % 3 == 0]
    b = t["curves"]
    return {
        "toy": curves(toy, x="round", y="ratio", color="series", log_y=True, x_title="round r",
                      y_title="‖∇f(Xʳ)‖_F / ‖∇f(X⁰)‖_F", color_title="method", highlight=[FEDMUON],
                      colors=toy_colors, title="Theorem 1's toy: LocalMuon never moves"),
        "toy_ns": curves(ns, x="round", y="ratio", color="T", log_y=True, x_title="round r",
                         y_title="‖∇f(Xʳ)‖_F / ‖∇f(X⁰)‖_F", color_title="FedMuon's LMO",
                         highlight=["T = 5"], title="Any number of Newton-Schulz iterations converges"),
        "digits": sweep(b, x="round", y="loss", param="dirichlet", color="method", log_y=True,
                        param_label="Dirichlet α", start=ALPHAS[0], x_title="round",
                        y_title="global training loss", highlight=[FEDMUON], colors=COLORS,
                        title="Federated digits, 8 of 16 clients per round"),
        "uploads": curves(b[b["dirichlet"] == ALPHAS[0]], x="uploads", y="loss", color="method",
                          log_y=True, x_title="model-sized tensors all-reduced",
                          y_title="global training loss", highlight=[FEDMUON], colors=COLORS,
                          title="Dirichlet 0.1: loss against communication"),
        "ns_map": sweep(t["ns_map"].assign(series="p_T"), x="sigma", y="output", param="T",
                        color="series", param_label="T", start=5, x_title="normalised singular value σ",
                        y_title="after T iterations",
                        title="The Newton-Schulz quintic on one singular value"),
    }


def ns_map_chart(steps: float = 5, cubic: bool = False) -> alt.TopLevelMixin:
    """The scalar Newton-Schulz map after ``steps`` iterations (``fedmuon-eq-ns``), for Keller's
    quintic and, when ``cubic`` is true, for the convergent cubic ``(1.5, -0.5, 0)`` beside it."""
    import altair as alt

    n = int(round(steps))
    data = [ns_map(n).assign(series="Keller quintic")]
    if cubic:
        data.append(ns_map(n, (1.5, -0.5, 0.0)).assign(series="cubic 1.5x − 0.5x³"))
    df = pd.concat(data, ignore_index=True)
    line = alt.Chart(df).mark_line().encode(
        x=alt.X("sigma:Q", title="normalised singular value σ"),
        y=alt.Y("output:Q", title=f"after T = {n} iterations", scale=alt.Scale(domain=[0, 1.3])),
        color=alt.Color("series:N", title="polynomial",
                        scale=alt.Scale(domain=["Keller quintic", "cubic 1.5x − 0.5x³"],
                                        range=[COLORS[FEDMUON], "#4c78a8"])))
    one = alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(strokeDash=[4, 4], color="black").encode(y="y:Q")
    return alt.layer(line, one).properties(width=420, height=240)


def explorer() -> Any:
    """An ipywidgets explorer of :func:`ns_map_chart`: the number of iterations T and whether to
    show the convergent cubic beside Keller's quintic."""
    import ipywidgets as widgets

    from iclr_lab.core.widgets import explorer as make_explorer
    from iclr_lab.core.widgets import slider

    return make_explorer(ns_map_chart, steps=slider("T (iterations)", 5, 0, 8, 1),
                         cubic=widgets.Checkbox(value=True, description="show the cubic"))
