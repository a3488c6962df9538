"""Tensor completion of a colour image by asymmetric FGD, the chapter's demonstration on real data.

An ``n1 x n2 x 3`` colour image is read as a tensor whose tubes are the colour triples. Entries
(one colour channel of one pixel) are observed at random (each with probability ``p``) with
Gaussian noise, and FGD fits ``X = L * R^T`` (``tubal_fgd-eq-completion``) to the observed
entries, from a small or a spectral start, with early stopping on held-out observed entries
(``tubal_fgd-eq-es``). Completion does not satisfy the t-RIP that the paper's theory assumes, and
the paper's factorisation for it is asymmetric; see the chapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed
from iclr_lab.recovery.tubal_fgd.algebra import t_svd
from iclr_lab.recovery.tubal_fgd.method import _generator

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CompletionResult", "complete", "completion_demo", "completion_figure", "psnr"]

#: the dimensionless step: eta = STEP / ||Y_train / p|| (spectral norm)
STEP = 0.2


def psnr(estimate: np.ndarray, truth: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB of an image with values in ``[0, 1]`` (the estimate is
    clipped to that range first). Both are non-empty finite real arrays of the same shape."""
    estimate = np.asarray(check_array("estimate", estimate), dtype=np.float64)
    truth = np.asarray(check_array("truth", truth), dtype=np.float64)
    if estimate.shape != truth.shape:
        raise ValueError(f"estimate and truth must have the same shape, got {estimate.shape} and "
                         f"{truth.shape}")
    mse = float(np.mean((np.clip(estimate, 0.0, 1.0) - truth) ** 2))
    return float("inf") if mse == 0.0 else 10.0 * float(np.log10(1.0 / mse))


@dataclass(frozen=True)
class CompletionResult:
    """One run of :func:`complete`.

    Attributes:
        X: the last estimate ``L * R^T``.
        X_es: the estimate with the smallest validation loss.
        t_es: its iteration.
        eta: the step size used.
        val_loss: the validation loss at iterations ``0 .. steps``.
        psnr: the PSNR (dB) against ``truth`` at the same iterations (NaN without ``truth``).
    """

    X: np.ndarray
    X_es: np.ndarray
    t_es: int
    eta: float
    val_loss: np.ndarray
    psnr: np.ndarray


def _fft(x: np.ndarray) -> np.ndarray:
    return np.moveaxis(np.fft.fft(x, axis=2), 2, 0)  # (k, n1, n2)


def _ifft(xh: np.ndarray) -> np.ndarray:
    return np.fft.ifft(np.moveaxis(xh, 0, 2), axis=2).real


def complete(observed: np.ndarray, mask: np.ndarray, R: int, *,
             init: Literal["small", "spectral"] = "small", alpha: float = 1e-3,
             eta: float | None = None, steps: int = 500, val_fraction: float = 0.1,
             truth: np.ndarray | None = None, rng: np.random.Generator | int = 0
             ) -> CompletionResult:
    """Asymmetric FGD for tensor completion (``tubal_fgd-eq-completion``).

    A share ``val_fraction`` of the observed entries is held out; FGD descends
    ``||P_train(L * R^T - Y)||^2 / (2 p)`` on the rest (``p`` the share of entries trained on) and
    keeps the iterate with the smallest validation loss ``||P_val(L * R^T - Y)||^2 / 2``
    (``tubal_fgd-eq-es``).

    Args:
        observed: the tensor ``Y`` (``n1 x n2 x k``, every side at least 1; values at unobserved
            entries are ignored, the observed ones must be finite).
        mask: boolean (or 0/1), ``True`` where an entry is observed; the shape of ``observed``.
        R: the tubal rank of the factors ``L`` (``n1 x R x k``) and ``R`` (``n2 x R x k``),
            ``1 <= R <= min(n1, n2)``.
        init: ``"small"`` (i.i.d. ``N(0, alpha^2 / R)`` entries in both factors) or ``"spectral"``
            (the top ``R`` singular tubes of ``P_train(Y) / p``, split evenly between the factors).
        alpha: the scale of the small start, in ``(0, inf)``.
        eta: the step size, in ``(0, inf)``; by default ``0.2 / ||P_train(Y) / p||``.
        steps: the number of updates, ``>= 1``.
        val_fraction: the share of the observed entries held out, in ``(0, 1)``.
        truth: the full tensor (finite, the shape of ``observed``), only to record the PSNR along
            the run.
        rng: the random source of the split and of the small start: a numpy ``Generator`` or a
            seed in ``[0, 2**32 - 1]``.
    """
    y = np.asarray(check_array("observed", observed, finite=False))
    if np.iscomplexobj(y):
        raise TypeError(f"observed must be real, got dtype {y.dtype}")
    y = y.astype(np.float64, copy=False)
    if y.ndim != 3:
        raise ValueError(f"observed must be a third-order tensor, got shape {y.shape}")
    omega = np.asarray(check_array("mask", mask, shape=y.shape))  # finite: NaN is not a flag
    if omega.dtype != bool:
        if not np.all((omega == 0) | (omega == 1)):
            raise ValueError("mask must be boolean (or 0 and 1), True where an entry is observed")
        omega = omega.astype(bool)
    if not np.all(np.isfinite(y[omega])):
        raise ValueError("observed must be finite where mask is True")
    n1, n2, k = y.shape
    R = check_int("R", R, 1, min(n1, n2))
    check_choice("init", init, ("small", "spectral"))
    alpha = check_range("alpha", alpha, 0.0, low_open=True)
    if eta is not None:
        eta = check_range("eta", eta, 0.0, low_open=True)
    steps = check_int("steps", steps, 1)
    check_range("val_fraction", val_fraction, 0.0, 1.0, low_open=True, high_open=True)
    if truth is not None:
        truth = np.asarray(check_array("truth", truth, shape=y.shape), dtype=np.float64)
    gen = _generator(rng)
    idx = np.flatnonzero(omega)
    if idx.size < 2:
        raise ValueError("mask must mark at least two observed entries (one to train, one to validate)")
    val_idx = gen.choice(idx, size=min(max(1, round(val_fraction * idx.size)), idx.size - 1),
                         replace=False)
    flat = np.zeros(y.size, dtype=bool)
    flat[val_idx] = True
    val = flat.reshape(y.shape)
    train = omega & ~val
    p = float(train.mean())
    y0 = np.where(omega, y, 0.0)
    back = np.where(train, y0, 0.0) / p
    scale = float(np.linalg.norm(_fft(back), ord=2, axis=(1, 2)).max())
    if scale == 0.0:
        raise ValueError("the observed entries are all zero: there is nothing to complete")
    eta = STEP / scale if eta is None else eta
    if init == "small":
        lh = _fft(alpha / np.sqrt(R) * gen.standard_normal((n1, R, k)))
        rh = _fft(alpha / np.sqrt(R) * gen.standard_normal((n2, R, k)))
    else:  # the top R singular tubes, split evenly: L = U S^(1/2), R = V S^(1/2)
        # t_svd makes the slices' singular vectors conjugate-symmetric, so the factors are real;
        # independent SVDs of the slices would give them arbitrary phases
        u, s_t, v = t_svd(back)
        sh = np.sqrt(np.abs(np.diagonal(_fft(s_t), axis1=1, axis2=2)))[:, None, :R]  # (k, 1, R)
        lh, rh = _fft(u)[:, :, :R] * sh, _fft(v)[:, :, :R] * sh
    losses, psnrs = np.full(steps + 1, np.nan), np.full(steps + 1, np.nan)
    best, x_es, t_es = np.inf, np.zeros_like(y), 0
    for t in range(steps + 1):
        x = _ifft(lh @ np.conj(np.swapaxes(rh, 1, 2)))
        resid = x - y0
        losses[t] = 0.5 * float(np.sum(resid[val] ** 2))
        if truth is not None:
            psnrs[t] = psnr(x, truth)
        if losses[t] < best:
            best, x_es, t_es = losses[t], x, t
        if t == steps:
            break
        gh = _fft(np.where(train, resid, 0.0) / p)
        lh, rh = (lh - eta * gh @ rh, rh - eta * np.conj(np.swapaxes(gh, 1, 2)) @ lh)
    return CompletionResult(X=x, X_es=x_es, t_es=t_es, eta=float(eta), val_loss=losses, psnr=psnrs)


def completion_demo(size: int = 64, p: float = 0.3, sigma: float = 0.07,
                    ranks: tuple[int, ...] = (4, 8, 32), steps: int = 500, seed: int = 0
                    ) -> dict[str, Any]:
    """The chapter's demonstration: scikit-image's bundled *astronaut* picture, resized to
    ``size x size x 3``, observed at a random share ``p`` of its entries with N(0, sigma^2) noise,
    completed by :func:`complete` from the small and the spectral start for each factor rank in
    ``ranks``, against filling every missing entry with its colour channel's observed mean.

    Returns:
        ``{"table": DataFrame, "images": {name: image}}``: one row per method with its PSNR at the
        validation-chosen iterate, its best and last PSNR along the run and the chosen iteration;
        the images are the truth, the observation and each method's estimate.

    ``size`` is in ``[8, 512]``, ``p`` in ``(0, 1]``, ``sigma`` in ``[0, inf)``, each rank in
    ``[1, size]``, ``steps >= 1`` and ``seed`` in ``[0, 2**32 - 1]``.
    """
    size = check_int("size", size, 8, 512)
    check_range("p", p, 0.0, 1.0, low_open=True)
    sigma = check_range("sigma", sigma, 0.0)
    if isinstance(ranks, str) or not isinstance(ranks, Sequence):
        raise TypeError(f"ranks must be a sequence of integers, got {type(ranks).__name__}")
    ranks = tuple(check_int("ranks", R, 1, size) for R in ranks)
    steps = check_int("steps", steps, 1)
    seed = check_seed(seed)

    import pandas as pd
    from skimage import data
    from skimage.transform import resize
    truth = resize(data.astronaut(), (size, size), anti_aliasing=True).astype(np.float64)
    gen = np.random.default_rng([seed, 15])
    mask = gen.uniform(size=truth.shape) < p
    observed = np.where(mask, truth + sigma * gen.standard_normal(truth.shape), np.nan)
    filled = np.where(mask, observed, np.nanmean(observed, axis=(0, 1), keepdims=True))
    rows: list[dict[str, Any]] = [{"method": "mean fill", "R": np.nan, "PSNR at ES": psnr(filled, truth),
                                   "best PSNR": np.nan, "last PSNR": np.nan, "ES iteration": np.nan}]
    images = {"truth": truth, "observed": np.where(mask, np.clip(observed, 0, 1), 1.0),
              "mean fill": filled}
    for R in ranks:
        for init in ("small", "spectral"):
            res = complete(np.nan_to_num(observed), mask, R, init=init, steps=steps, truth=truth,
                           rng=np.random.default_rng([seed, 16]))
            name = f"FGD, {init} start, R = {R}"
            rows.append({"method": name, "R": R, "PSNR at ES": psnr(res.X_es, truth),
                         "best PSNR": float(np.nanmax(res.psnr)),
                         "last PSNR": float(res.psnr[-1]), "ES iteration": res.t_es})
            images[name] = res.X_es
    table: pd.DataFrame = pd.DataFrame(rows)
    return {"table": table, "images": images}


def completion_figure(images: dict[str, np.ndarray], names: list[str], *, zoom: int = 3) -> bytes:
    """A PNG of the images ``names`` from :func:`completion_demo` side by side, each enlarged
    ``zoom`` times (nearest neighbour) under its name; display it with ``IPython.display.Image``.
    ``zoom`` is in ``[1, 16]``; the images named are finite ``h x w x 3`` arrays of one shape."""
    import io

    from PIL import Image, ImageDraw

    zoom = check_int("zoom", zoom, 1, 16)
    if not names:
        raise ValueError("names must name at least one image")
    missing = [n for n in names if n not in images]
    if missing:
        raise ValueError(f"names {missing} are not among the images {list(images)}")
    first = check_array(f"images[{names[0]!r}]", images[names[0]], ndim=3)
    for n in names:
        check_array(f"images[{n!r}]", images[n], shape=(*first.shape[:2], 3))
    tiles = [np.clip(images[n], 0.0, 1.0) for n in names]
    h, w = tiles[0].shape[0] * zoom, tiles[0].shape[1] * zoom
    pad, label = 8, 30
    canvas = Image.new("RGB", (len(tiles) * (w + pad) + pad, h + label + pad), "white")
    draw = ImageDraw.Draw(canvas)
    for i, (name, tile) in enumerate(zip(names, tiles, strict=True)):
        img = Image.fromarray((tile * 255).round().astype(np.uint8)).resize((w, h), Image.Resampling.NEAREST)
        x = pad + i * (w + pad)
        canvas.paste(img, (x, label))
        short = name.replace("FGD, ", "")
        lines = short.split(", R") if ", R" in short else [short]
        text = lines[0] if len(lines) == 1 else f"{lines[0]}\nR{lines[1]}"
        draw.multiline_text((x, 2), text, fill="black", spacing=1)
    buf = io.BytesIO()
    canvas.save(buf, format="PNG", optimize=True)
    return buf.getvalue()
