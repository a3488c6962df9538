"""The exact invariances behind DNT, on one feed-forward sub-block (float64, no training).

* :func:`subblock_jacobian`: the input-Jacobian of a feed-forward sub-block ``f(x) = W_2 act(W_1 x)``
  in three layouts: the bare branch ``f`` (``"none"``), MidNorm ``RMSNorm(f(x))`` (``"mid"``,
  ``dnt-eq-midnorm``) and PostNorm ``RMSNorm(x + f(x))`` (``"post"``).
* :func:`midnorm_invariance`: how much the output and the Jacobian of each layout change when
  ``W_1`` and ``W_2`` are rescaled: zero for MidNorm with ReLU (the paper's Proposition on MidNorm,
  ``dnt-thm-midnorm``), ``c1 c2`` for the bare branch.
* :func:`jacobian_spectrum` and :func:`jacobian_explorer_chart`: the singular values of the three
  Jacobians as the weights grow or shrink (the chapter's live explorer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd
import torch

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed

if TYPE_CHECKING:
    import altair as alt

__all__ = ["LAYOUTS", "jacobian_explorer_chart", "jacobian_spectrum", "midnorm_invariance",
           "subblock_jacobian"]

Layout = Literal["none", "mid", "post"]
#: The three sub-block layouts, with their legend names.
LAYOUTS: dict[str, str] = {"none": "no norm: f(x)", "mid": "MidNorm: N(f(x))",
                           "post": "PostNorm: N(x + f(x))"}


def _rms_norm(z: torch.Tensor, eps: float) -> torch.Tensor:
    # gain 1; the same formula as torch.nn.RMSNorm
    return z * torch.rsqrt(z.pow(2).mean() + eps)


def _subblock(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, layout: str, activation: str,
              eps: float) -> torch.Tensor:
    h = w1 @ x
    f = w2 @ (torch.relu(h) if activation == "relu" else torch.nn.functional.gelu(h))
    if layout == "none":
        return f
    if layout == "mid":
        return _rms_norm(f, eps)
    return _rms_norm(x + f, eps)


def subblock_jacobian(w1: np.ndarray, w2: np.ndarray, x: np.ndarray, layout: str = "mid", *,
                      activation: str = "relu", eps: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The output and the input-Jacobian of one feed-forward sub-block, in float64.

    Args:
        w1: ``W_1``, shape ``(d_ff, d)``, finite.
        w2: ``W_2``, shape ``(d, d_ff)``, finite.
        x: the input, shape ``(d,)``, finite.
        layout: ``"none"`` (the branch ``f(x) = W_2 act(W_1 x)``), ``"mid"`` (MidNorm,
            ``RMSNorm(f(x))``, ``dnt-eq-midnorm``) or ``"post"`` (PostNorm, ``RMSNorm(x + f(x))``).
        activation: ``"relu"`` (positively homogeneous, as in the paper's Proposition) or ``"gelu"``.
        eps: the RMSNorm ``epsilon``, in ``[0, inf)``; the invariance is exact only for ``eps = 0``.

    Returns:
        ``(output, jacobian)`` with shapes ``(d,)`` and ``(d, d)``.
    """
    check_choice("layout", layout, tuple(LAYOUTS))
    check_choice("activation", activation, ("relu", "gelu"))
    check_range("eps", eps, 0.0)
    d = check_array("x", x, ndim=1).shape[0]
    d_ff = check_array("w1", w1, shape=(None, d)).shape[0]
    check_array("w2", w2, shape=(d, d_ff))
    w1t, w2t, xt = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (w1, w2, x))

    def fn(v: torch.Tensor) -> torch.Tensor:
        return _subblock(v, w1t, w2t, layout, activation, eps)

    jac = torch.autograd.functional.jacobian(fn, xt)
    return fn(xt).numpy(), jac.numpy()


def _random_subblock(d: int, d_ff: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights with variance ``1 / fan_in`` and an input of unit RMS: every layer is O(1)."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((d_ff, d)) / np.sqrt(d)
    w2 = rng.standard_normal((d, d_ff)) / np.sqrt(d_ff)
    return w1, w2, rng.standard_normal(d)


def midnorm_invariance(scales: tuple[float, ...] = (0.1, 10.0), *, d: int = 32, d_ff: int = 128,
                       activation: str = "relu", eps: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Rescale ``W_1`` and ``W_2`` of a random sub-block by each ``c`` in ``scales`` and measure how
    much the output and the Jacobian of each layout change (``dnt-thm-midnorm``).

    Returns:
        A DataFrame with one row per layout and scale, and columns ``layout``, ``c``,
        ``output_change`` and ``jacobian_change`` (the largest relative change,
        ``max|new - old| / max|old|``) and ``jacobian_ratio`` (``||J(c)||_F / ||J(1)||_F``, which is
        ``c**2`` for the bare branch with ReLU and 1 with MidNorm).

    ``d`` is at least 2, ``d_ff`` at least 1, every scale in ``(0, inf)``, ``eps`` in ``[0, inf)``
    and ``seed`` in ``[0, 2**32 - 1]``.
    """
    check_int("d", d, 2)
    check_int("d_ff", d_ff, 1)
    for i, c in enumerate(scales):
        check_range(f"scales[{i}]", c, 0.0, low_open=True)
    check_choice("activation", activation, ("relu", "gelu"))
    check_range("eps", eps, 0.0)
    check_seed(seed)
    w1, w2, x = _random_subblock(d, d_ff, seed)
    rows = []
    for layout in LAYOUTS:
        y0, j0 = subblock_jacobian(w1, w2, x, layout, activation=activation, eps=eps)
        for c in scales:
            y, j = subblock_jacobian(c * w1, c * w2, x, layout, activation=activation, eps=eps)
            rows.append({"layout": layout, "c": float(c),
                         "output_change": float(np.abs(y - y0).max() / np.abs(y0).max()),
                         "jacobian_change": float(np.abs(j - j0).max() / np.abs(j0).max()),
                         "jacobian_ratio": float(np.linalg.norm(j) / np.linalg.norm(j0))})
    return pd.DataFrame(rows)


def jacobian_spectrum(scale_w1: float = 1.0, scale_w2: float = 1.0, *, d: int = 32,
                      d_ff: int = 128, activation: str = "relu", eps: float = 1e-6,
                      seed: int = 0) -> pd.DataFrame:
    """Singular values of the three layouts' Jacobians with ``W_1`` and ``W_2`` rescaled.

    A normalisation's Jacobian has one singular value near zero (exactly zero for ``eps = 0``: the
    direction it normalises away); it is dropped for the two normalised layouts, so that a log axis
    shows the rest.

    ``scale_w1`` and ``scale_w2`` are in ``(0, inf)``, ``d`` at least 2, ``d_ff`` at least 1,
    ``eps`` in ``[0, inf)`` and ``seed`` in ``[0, 2**32 - 1]``.

    Returns:
        A DataFrame with columns ``layout`` (the legend name), ``index`` (1 = largest) and
        ``singular_value``.
    """
    check_range("scale_w1", scale_w1, 0.0, low_open=True)
    check_range("scale_w2", scale_w2, 0.0, low_open=True)
    check_int("d", d, 2)
    check_int("d_ff", d_ff, 1)
    check_choice("activation", activation, ("relu", "gelu"))
    check_range("eps", eps, 0.0)
    check_seed(seed)
    w1, w2, x = _random_subblock(d, d_ff, seed)
    rows = []
    for layout, label in LAYOUTS.items():
        _, j = subblock_jacobian(scale_w1 * w1, scale_w2 * w2, x, layout, activation=activation,
                                 eps=eps)
        s = np.linalg.svd(j, compute_uv=False)
        if layout != "none":
            s = s[:-1]
        rows.append(pd.DataFrame({"layout": label, "index": np.arange(1, len(s) + 1),
                                  "singular_value": s}))
    return pd.concat(rows, ignore_index=True)


def jacobian_explorer_chart(scale_w1: float = 1.0, scale_w2: float = 1.0) -> alt.LayerChart:
    """The singular values of the sub-block Jacobian for the three layouts (log axis), with ``W_1``
    and ``W_2`` multiplied by ``scale_w1`` and ``scale_w2`` (``dnt-thm-midnorm``)."""
    import altair as alt

    from iclr_lab.core.charts import palette

    df = jacobian_spectrum(scale_w1, scale_w2)
    # MidNorm last, so that it is drawn on top of PostNorm where the two coincide (large weights)
    names = [LAYOUTS["none"], LAYOUTS["post"], LAYOUTS["mid"]]
    color = alt.Color("layout:N", title="layout", sort=names, scale=palette(names, LAYOUTS["mid"]))
    # same field and title as the colour: Vega-Lite merges the two into one legend
    dash = alt.StrokeDash("layout:N", sort=names, title="layout",
                          scale=alt.Scale(domain=names, range=[[1, 0], [6, 3], [1, 0]]))
    line = alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=14)).encode(
        x=alt.X("index:Q", title="singular value index (1 = largest)"),
        y=alt.Y("singular_value:Q", title="singular value of ∂out/∂x",
                scale=alt.Scale(type="log", domain=[1e-5, 1e5], clamp=True)),
        color=color, strokeDash=dash,
        strokeWidth=alt.condition(alt.datum.layout == LAYOUTS["mid"], alt.value(3.0), alt.value(1.6)),
        order=alt.Order("index:Q"),
        tooltip=["layout", "index", alt.Tooltip("singular_value:Q", format=".3g")])
    return alt.LayerChart(layer=[line], width=440, height=260,
                          title=f"Sub-block Jacobian, W1 x {scale_w1:.3g} and W2 x {scale_w2:.3g}")
