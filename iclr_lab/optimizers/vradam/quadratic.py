"""VR-momentum on a quadratic: the edge-of-stability toy of the VRAdam chapter (numpy).

* :func:`momentum_matrix` (``vradam-eq-matrix``), :func:`stability_limit` (``vradam-eq-stability``),
  :func:`edge_velocity` (``vradam-eq-edge``) and :func:`two_cycle` (the period-2 orbits on which
  ``vradam-eq-edge`` is exact);
* :func:`vr_momentum_quadratic`: VR-momentum (``vradam-eq-vrmomentum``) on independent 1-D
  quadratics, one run per value of ``r = alpha0 h / B``;
* :func:`switching_radius`: the worst growth factor of two alternating gates, a numerical probe of
  the "every gate sequence" reading of the paper's Theorem 4.1 (``vradam-thm-stability``);
* :func:`quadratic_explorer_chart` and :func:`explorer`: the chapter's live widget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from iclr_lab.core.validation import check_array, check_int, check_range

if TYPE_CHECKING:
    import altair as alt
    import ipywidgets

__all__ = ["edge_velocity", "explorer", "momentum_matrix", "quadratic_explorer_chart",
           "stability_limit", "switching_radius", "two_cycle", "vr_momentum_quadratic"]


def momentum_matrix(e: float, beta: float = 0.9) -> np.ndarray:
    """``A(e)`` of ``vradam-eq-matrix``: one step of EMA momentum with step ``eta`` on ``h x^2 / 2``,
    ``e = eta h``, acting on the state ``z = (x, v / h)``.

    ``v_t = beta v_{t-1} + (1 - beta) h x_{t-1}`` and ``x_t = x_{t-1} - eta v_t`` give
    ``A(e) = [[1 - e (1 - beta), -e beta], [1 - beta, beta]]``: determinant ``beta``, trace
    ``1 + beta - e (1 - beta)``. ``e`` is in ``[0, inf)`` and ``beta`` in ``[0, 1)``.
    """
    e = check_range("e", e, 0)
    beta = check_range("beta", beta, 0, 1, high_open=True)
    return np.array([[1.0 - e * (1.0 - beta), -e * beta], [1.0 - beta, beta]])


def stability_limit(beta: float) -> float:
    """``B(beta) = 2 (1 + beta) / (1 - beta)`` (``vradam-eq-stability``): EMA momentum with a constant
    step ``eta`` on ``h x^2 / 2`` is stable iff ``eta h < B(beta)`` (38 for ``beta = 0.9``)."""
    beta = check_range("beta", beta, 0, 1, high_open=True)
    return 2.0 * (1.0 + beta) / (1.0 - beta)


def edge_velocity(r: float | np.ndarray, beta3: float) -> np.ndarray:
    """The edge velocity ``sqrt((r - 1) / beta3)`` of ``vradam-eq-edge`` for ``r = alpha0 h / B``
    (0 for ``r <= 1``, where the origin is stable).

    On the symmetric two-step orbit (``1 < r <= 2``) it is ``|v_t|`` at every step; on any period-2
    orbit it is the RMS velocity exactly (see :func:`two_cycle`). ``r`` (a number or an array) must
    be finite, ``beta3`` in ``(0, inf)``.
    """
    check_array("r", r)
    beta3 = check_range("beta3", beta3, 0, low_open=True)
    return np.sqrt(np.maximum(np.asarray(r, dtype=float) - 1.0, 0.0) / beta3)


def two_cycle(r: float | np.ndarray, *, beta: float = 0.9,
              beta3: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A point ``(x_t, v_t)`` of the period-2 orbit of VR-momentum on ``x^2 / 2`` (``h = 1``).

    For ``1 < r <= 2`` the orbit is symmetric: ``x_{t+1} = -x_t``, ``v_{t+1} = -v_t`` with
    ``v_t^2 = (r - 1) / beta3`` and ``eta_t h = B`` at every step (``vradam-eq-edge``). For
    ``r > 2`` it is the asymmetric orbit with ``v_{t+1} = -q v_t``,
    ``q = (r - 1) + sqrt((r - 1)^2 - 1)``; on it the mean of ``v_t^2`` is still ``(r - 1) / beta3``.
    The point returned is the state right after a step with velocity ``v_t > 0``. The cap
    ``alpha1`` is assumed inactive (``beta3 v^2 <= alpha1`` on the orbit, true for ``r <= 10``
    when ``alpha1 = 19``). ``r`` is a finite number or array, ``beta`` in ``[0, 1)`` and ``beta3``
    in ``(0, inf)``.
    """
    check_array("r", r)
    r = np.asarray(r, dtype=float)
    if np.any(r <= 1):
        raise ValueError(f"r must be > 1 (a two-step orbit exists only past the edge), got {r}")
    beta = check_range("beta", beta, 0, 1, high_open=True)
    beta3 = check_range("beta3", beta3, 0, low_open=True)
    q = np.where(r <= 2.0, 1.0, (r - 1.0) + np.sqrt(np.maximum((r - 1.0) ** 2 - 1.0, 0.0)))
    v1 = np.sqrt((2.0 * r / (1.0 + q) - 1.0) / beta3)
    x1 = (-q * v1 - beta * v1) / (1.0 - beta)  # the x that sends v1 to the next velocity -q v1
    return x1, v1


def vr_momentum_quadratic(
    r: Sequence[float] | np.ndarray,
    *,
    beta: float = 0.9,
    beta3: float = 1.0,
    lr_cutoff: float = 19.0,
    steps: int = 4000,
    h: float = 1.0,
    x0: float | np.ndarray = 1.0,
    v0: float | np.ndarray = 0.0,
    blowup: float = 1e6,
) -> dict[str, np.ndarray]:
    """VR-momentum (``vradam-eq-vrmomentum``) on ``f(x) = h x^2 / 2``, one run per entry of ``r``.

    ``r = alpha0 h / B(beta)`` is the base step in units of the stability limit
    (``vradam-eq-stability``), so ``alpha0 = r B / h``. ``beta3 = 0`` is plain EMA momentum with step
    ``alpha0``. ``x0`` and ``v0`` (the velocity buffer before the first step) are scalars or one value
    per run. A run whose ``|x|`` exceeds ``blowup`` is marked diverged and its later entries are NaN.

    ``r``, ``x0`` and ``v0`` must be finite; ``beta`` is in ``[0, 1)``, ``beta3`` and ``lr_cutoff``
    in ``[0, inf)``, ``h`` in ``(0, inf)``, ``steps`` at least 1 and ``blowup`` in ``(0, inf]``
    (``inf`` never stops a run).

    Returns:
        ``x``, ``v`` and ``ratio`` (``eta_t h / B``), each of shape ``(steps, len(r))``, and
        ``diverged`` (bool, ``len(r)``).
    """
    check_array("r", r, ndim=(0, 1))
    check_array("x0", x0)
    check_array("v0", v0)
    r = np.atleast_1d(np.asarray(r, dtype=float))
    check_range("beta", beta, 0, 1, high_open=True)
    check_range("beta3", beta3, 0)
    check_range("lr_cutoff", lr_cutoff, 0)
    check_range("h", h, 0, low_open=True)
    steps = check_int("steps", steps, 1)
    check_range("blowup", blowup, 0, math.inf, low_open=True, high_open=False)
    big_b = stability_limit(beta)
    alpha0 = r * big_b / h
    x = np.broadcast_to(np.asarray(x0, dtype=float), r.shape).copy()
    v = np.broadcast_to(np.asarray(v0, dtype=float), r.shape).copy()
    xs, vs, ratios = (np.full((steps, r.size), np.nan) for _ in range(3))
    alive = np.ones(r.shape, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(steps):
            v = beta * v + (1.0 - beta) * h * x
            eta = alpha0 / (1.0 + np.minimum(beta3 * v * v, lr_cutoff))
            x = x - eta * v
            alive &= np.abs(x) < blowup
            x = np.where(alive, x, 0.0)
            v = np.where(alive, v, 0.0)
            xs[t] = np.where(alive, x, np.nan)
            vs[t] = np.where(alive, v, np.nan)
            ratios[t] = np.where(alive, eta * h / big_b, np.nan)
    return {"x": xs, "v": vs, "ratio": ratios, "diverged": ~alive}


def switching_radius(c: float, *, beta: float = 0.9, lr_cutoff: float = 19.0,
                     grid: int = 40) -> float:
    """Worst per-step growth factor of two alternating gates on a 1-D quadratic.

    For ``e = eta h`` the linear EMA-momentum map is :func:`momentum_matrix` ``A(e)``. Every single
    ``A(e)`` with ``0 < e < B`` has spectral radius below 1 (``sqrt(beta)`` when its eigenvalues are
    complex), but it is far from normal (``||A(e)||_2`` is well above 1), so products of two
    different ones can grow. This returns
    ``max sqrt(rho(A(e2) A(e1)))`` over gates ``e1, e2`` on a grid of
    ``[c B / (1 + lr_cutoff), c B]``: a value above 1 means that *some* gate sequence inside the
    allowed band grows without bound even though ``alpha0 h = c B < B``.

    ``c`` is in ``(0, inf)``, ``beta`` in ``[0, 1)``, ``lr_cutoff`` in ``[0, inf]`` (``inf``: the
    band reaches down to ``e = 0``) and ``grid`` at least 2.
    """
    c = check_range("c", c, 0, low_open=True)
    lr_cutoff = check_range("lr_cutoff", lr_cutoff, 0, math.inf, high_open=False)
    big_b = stability_limit(beta)
    es = np.linspace(1.0 / (1.0 + lr_cutoff), 1.0, check_int("grid", grid, 2)) * c * big_b
    mats = np.stack([momentum_matrix(e, beta) for e in es])
    prods = np.einsum("aij,bjk->abik", mats, mats).reshape(-1, 2, 2)
    return float(np.sqrt(np.abs(np.linalg.eigvals(prods)).max()))


def quadratic_explorer_chart(r: float = 2.5, beta3: float = 1.0, lr_cutoff: float = 19.0,
                             steps: int = 300) -> alt.VConcatChart:
    """"Heavier when fast": ``eta_t h / B`` and ``x_t`` for VR-momentum and plain momentum.

    A pure function of its arguments (the ipywidgets explorer wraps it). ``x_t`` is clipped to twice
    the largest ``|x_t|`` of VR-momentum, so its orbit is drawn whole and plain momentum that
    diverges is drawn until it leaves the plot. ``r`` is in ``(0, inf)``, ``beta3`` and
    ``lr_cutoff`` in ``[0, inf)``, ``steps`` at least 1 (as for :func:`vr_momentum_quadratic`).
    """
    r = check_range("r", r, 0, low_open=True)
    check_range("beta3", beta3, 0)
    check_range("lr_cutoff", lr_cutoff, 0)
    check_int("steps", steps, 1)

    import altair as alt

    from iclr_lab.core.charts import palette, reference_line

    vr = vr_momentum_quadratic([r], beta3=beta3, lr_cutoff=lr_cutoff, steps=steps)
    plain = vr_momentum_quadratic([r], beta3=0.0, lr_cutoff=lr_cutoff, steps=steps)
    t = np.arange(1, steps + 1)
    vr_x = vr["x"][:, 0]
    lim = float(2.0 * max(np.nanmax(np.abs(vr_x)) if np.isfinite(vr_x).any() else 1e6, 1.0))
    rows = []
    for name, run in (("VR-momentum", vr), ("plain momentum", plain)):
        x = run["x"][:, 0]
        rows.append(pd.DataFrame({"step": t, "method": name, "x": np.clip(x, -lim, lim),
                                  "gate": run["ratio"][:, 0]}))
    df = pd.concat(rows, ignore_index=True).dropna()
    color = alt.Color("method:N", title=None,
                      scale=palette(["VR-momentum", "plain momentum"], "VR-momentum"))
    top = alt.Chart(df).mark_line().encode(
        x=alt.X("step:Q", title="step t"),
        y=alt.Y("gate:Q", title="η_t h / B (dashed: the edge, 1)"), color=color)
    bottom = alt.Chart(df).mark_line().encode(
        x=alt.X("step:Q", title="step t"), y=alt.Y("x:Q", title=f"x_t (clipped to ±{lim:.3g})"),
        color=color)
    title = f"r = α₀h/B = {r:.3g}, β₃ = {beta3:.3g}, α₁ = {lr_cutoff:.3g}"
    return alt.vconcat(
        (top + reference_line(1.0)).properties(width=440, height=150, title=title),
        bottom.properties(width=440, height=150)).configure(
        font="DejaVu Sans, Verdana, sans-serif")  # has the subscripts of α₀ and β₃


def explorer() -> ipywidgets.interactive:
    """ipywidgets explorer of :func:`quadratic_explorer_chart`: sliders for ``r``, ``beta3``, ``alpha1``."""
    import ipywidgets as widgets

    from iclr_lab.core.widgets import explorer as make_explorer
    from iclr_lab.core.widgets import log_slider, slider

    return make_explorer(
        quadratic_explorer_chart,
        r=slider("r = α₀h/B", 2.5, 0.5, 25.0, 0.05),
        beta3=log_slider("β₃", 1.0, 0.1, 100.0),
        lr_cutoff=slider("α₁ (lr_cutoff)", 19.0, 0.0, 30.0, 1.0),
        steps=widgets.IntSlider(value=300, min=50, max=2000, step=50, description="steps",
                                continuous_update=False),
    )
