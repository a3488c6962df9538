"""AMD's method and its baselines: the paired digits data, the dual encoder, expert trajectories,
trajectory-matching distillation (synchronous MTT-VL style and AMD's asynchronous starts), k-means
prototype initialisation (SPM) and the retrieval metrics.

Every network here is a *batch* of independent dual encoders held as flat parameter tensors of
shape ``(P, D)``; ``P`` models train in one autograd call because their losses are summed and share
no parameter. Evaluation trains one model per (set, learning rate, seed)
(:func:`evaluate_sets`); :func:`distill_many` runs several distillations as one batch of students.
The batched runs give each model the numbers it gets when it runs alone, to the bit
(``tests/data/test_amd_batched.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from iclr_lab.core.validation import (
    _all_finite,
    check_array,
    check_choice,
    check_int,
    check_range,
    check_seed,
)

__all__ = [
    "EMBED_DIM",
    "LR_GRID",
    "TEXT_DIM",
    "contrastive_grad",
    "contrastive_loss",
    "VOCAB",
    "DistillResult",
    "PairedDigits",
    "Trajectories",
    "async_ranges",
    "distill",
    "distill_many",
    "encode",
    "evaluate_set",
    "evaluate_sets",
    "init_params",
    "kmeans_prototypes",
    "matching_loss",
    "paired_digits",
    "random_subset",
    "rate_sweep",
    "retrieval_recall",
    "stratified_subset",
    "text_encoder",
    "train_experts",
    "train_on_set",
    "train_on_sets",
]

IMG_DIM, HIDDEN, EMBED_DIM, TEXT_DIM = 64, 128, 32, 32
TEMPERATURE = 0.1
#: learning rates every set (coreset or distilled) is evaluated at; the one with the best
#: validation RSUM is kept (the same grid and the same rule for every set)
LR_GRID: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)

_DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_ATTRIBUTES = (("left-leaning", "upright", "right-leaning"), ("faint", "medium-ink", "bold"),
               ("narrow", "mid-width", "wide"), ("short", "mid-height", "tall"),
               ("high", "centred", "low"))
_ROW_WORDS = tuple(tuple(f"row{r}-{w}" for w in ("light", "mid", "heavy")) for r in range(8))
#: The 49 words of the captions. Each caption has a digit word, 5 shape attributes and the ink of
#: each of the 8 rows.
VOCAB: tuple[str, ...] = (_DIGIT_WORDS + tuple(w for a in _ATTRIBUTES for w in a)
                          + tuple(w for r in _ROW_WORDS for w in r))
_TEXT_ENCODER_SEED = 123  # the frozen "pretrained" text encoder is the same in every run


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairedDigits:
    """Image-caption pairs built from scikit-learn's digits (see ``amd-eq-caption``).

    ``images`` are the 64 pixels scaled to [0, 1]; ``tokens`` the 14 word ids of each caption;
    ``texts`` the frozen text encoder's 32-d embedding of the caption. ``train``, ``val`` and
    ``test`` index the rows: experts and coresets use ``train``, the evaluation's learning rate is
    chosen on ``val``, every reported recall is on ``test``.
    """

    images: np.ndarray
    tokens: np.ndarray
    texts: np.ndarray
    labels: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray

    def caption(self, i: int) -> str:
        """The caption of pair ``i`` as words."""
        return " ".join(VOCAB[t] for t in self.tokens[i])

    def tensors(self, part: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``(images, texts)`` of ``part`` ("train", "val" or "test") as float32 tensors."""
        idx = getattr(self, check_choice("part", part, ("train", "val", "test")))
        return torch.from_numpy(self.images[idx]), torch.from_numpy(self.texts[idx])


def _terciles(x: np.ndarray) -> np.ndarray:
    """0, 1 or 2: the tercile of each entry of ``x`` over the whole data set."""
    return np.searchsorted(np.quantile(x, [1 / 3, 2 / 3]), x, side="right")


def text_encoder(tokens: np.ndarray) -> np.ndarray:
    """The frozen text encoder: mean of fixed random word vectors, standardised (``amd-eq-caption``).

    ``tokens`` is ``(n, L)``: ``n >= 2`` captions of ``L`` word ids in ``[0, len(VOCAB) - 1]``. Each
    embedding dimension is standardised over the ``n`` captions, so they must not all be the same.
    """
    tokens = check_array("tokens", tokens, ndim=2)
    if tokens.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integer word ids, got dtype {tokens.dtype}")
    if tokens.shape[0] < 2:
        raise ValueError(f"tokens must hold at least 2 captions (the encoder standardises over them), "
                         f"got shape {tokens.shape}")
    if tokens.min() < 0 or tokens.max() >= len(VOCAB):
        raise ValueError(f"tokens must be word ids in [0, {len(VOCAB) - 1}], got ids from "
                         f"{tokens.min()} to {tokens.max()}")
    table = np.random.default_rng(_TEXT_ENCODER_SEED).standard_normal((len(VOCAB), TEXT_DIM))
    pooled = table[tokens].mean(axis=1)
    spread = pooled.std(0)
    if not (spread > 0).all():
        raise ValueError("tokens must not be one caption repeated: the encoder standardises each "
                         "dimension over the captions")
    return ((pooled - pooled.mean(0)) / spread).astype(np.float32)


def paired_digits(seed: int = 0, n_val: int = 200, n_test: int = 500) -> PairedDigits:
    """The 1797 digits, each paired with a generated 14-word caption; split by a seeded permutation.

    The caption (``amd-eq-caption``) names the digit, five shape attributes (slant, ink mass, width,
    height, vertical centre) and the ink of each of the 8 rows, each quantised into terciles.
    """
    from sklearn.datasets import load_digits

    seed = check_seed(seed)
    x, y = load_digits(return_X_y=True)
    n = len(y)
    n_val = check_int("n_val", n_val, 1, n // 2)
    n_test = check_int("n_test", n_test, 1, n - n_val - 100)
    img = (x / 16.0).astype(np.float32)
    pix = img.reshape(n, 8, 8) + 1e-9
    mass = pix.sum((1, 2))
    r = np.arange(8.0)
    row_w, col_w = pix.sum(2) / mass[:, None], pix.sum(1) / mass[:, None]
    mr, mc = row_w @ r, col_w @ r
    var_r = row_w @ r**2 - mr**2
    var_c = col_w @ r**2 - mc**2
    cov = np.einsum("nrc,r,c->n", pix, r, r) / mass - mr * mc
    # slant: how far the column moves per row (ink covariance over row variance); sign so that a
    # stroke leaning right (top to the right) reads "right-leaning"
    attrs = [-cov / var_r, mass, np.sqrt(var_c), np.sqrt(var_r), mr]
    words = [y]
    for k, a in enumerate(attrs):
        words.append(10 + 3 * k + _terciles(a))
    rows = pix.sum(2)
    for k in range(8):
        words.append(25 + 3 * k + _terciles(rows[:, k]))
    tokens = np.stack(words, 1).astype(np.int64)
    perm = np.random.default_rng(seed).permutation(n)
    return PairedDigits(img, tokens, text_encoder(tokens), y.astype(np.int64),
                        train=np.sort(perm[n_val + n_test:]), val=np.sort(perm[n_test:n_test + n_val]),
                        test=np.sort(perm[:n_test]))


# ---------------------------------------------------------------------------------------------
# the dual encoder, as flat parameters
# ---------------------------------------------------------------------------------------------

#: sizes of the image encoder's tensors (64-128-32 MLP) and of the text branch (a 32x32 linear map
#: on the frozen text embedding, as AMD's trainable projection on frozen BERT)
_V_SHAPES = ((IMG_DIM, HIDDEN), (HIDDEN,), (HIDDEN, EMBED_DIM), (EMBED_DIM,))
_L_SHAPES = ((TEXT_DIM, EMBED_DIM), (EMBED_DIM,))
DIM_V = sum(math.prod(s) for s in _V_SHAPES)
DIM_L = sum(math.prod(s) for s in _L_SHAPES)


def _unflat(theta: torch.Tensor, shapes: Sequence[tuple[int, ...]]) -> list[torch.Tensor]:
    out, k = [], 0
    for s in shapes:
        size = math.prod(s)
        out.append(theta[:, k:k + size].reshape(theta.shape[0], *s))
        k += size
    return out


def init_params(n_models: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_models`` fresh dual encoders, ``(theta_V, theta_L)`` of shapes ``(P, DIM_V)``,
    ``(P, DIM_L)``; each layer uniform in ``+-1/sqrt(fan_in)`` as ``torch.nn.Linear``
    (``n_models >= 1``)."""
    n_models = check_int("n_models", n_models, 1)
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")

    def flat(shapes: Sequence[tuple[int, ...]]) -> torch.Tensor:
        parts: list[torch.Tensor] = []
        for s in shapes:
            fan_in = s[0] if len(s) == 2 else parts[-1].shape[1] // s[0]
            bound = 1.0 / math.sqrt(fan_in)
            parts.append((torch.rand(n_models, math.prod(s), generator=gen) * 2 - 1) * bound)
        return torch.cat(parts, 1)

    return flat(_V_SHAPES), flat(_L_SHAPES)


def _input_layer(x: torch.Tensor | Sequence[torch.Tensor], w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` for weights ``w`` ``(P, d, h)``; ``x`` a tensor, or one ``(n, d)`` tensor per model.

    A per-model list is multiplied model by model, each product the one this model would get
    alone with shared inputs (torch folds ``(n, d) @ (1, d, h)`` into one matrix product, which
    rounds differently from the batched product), so stacked runs equal single ones to the bit.
    """
    if isinstance(x, torch.Tensor):
        return x @ w
    return (w.mT @ torch.stack(list(x)).mT).mT.contiguous()


def _tensor(name: str, value: object, **kw: object) -> torch.Tensor:
    """A finite, non-empty floating-point tensor (``check_array``'s other checks in ``kw``)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    return check_array(name, value, **kw)  # type: ignore[arg-type]


def _check_params(theta_v: torch.Tensor, theta_l: torch.Tensor) -> int:
    """``theta_v`` ``(P, DIM_V)`` and ``theta_l`` ``(P, DIM_L)``, finite, the same ``P``; returns ``P``."""
    _tensor("theta_v", theta_v, shape=(None, DIM_V))
    _tensor("theta_l", theta_l, shape=(None, DIM_L))
    if theta_v.shape[0] != theta_l.shape[0]:
        raise ValueError(f"theta_v and theta_l must hold the same number of models, got "
                         f"{theta_v.shape[0]} and {theta_l.shape[0]}")
    return int(theta_v.shape[0])


def _check_inputs(images: torch.Tensor | Sequence[torch.Tensor],
                  texts: torch.Tensor | Sequence[torch.Tensor], n_models: int) -> None:
    """The inputs of :func:`encode`: shared ``(n, d)`` tensors or per model (``(P, n, d)`` or ``P``
    tensors ``(n, d)``), finite, with as many texts as images."""
    sizes = []
    for name, x, d in (("images", images, IMG_DIM), ("texts", texts, TEXT_DIM)):
        if isinstance(x, torch.Tensor):
            _tensor(name, x, ndim=(2, 3))
            if x.shape[-1] != d or (x.ndim == 3 and x.shape[0] != n_models):
                raise ValueError(f"{name} must have shape (n, {d}) or ({n_models}, n, {d}), got "
                                 f"{tuple(x.shape)}")
            sizes.append(int(x.shape[-2]))
            continue
        parts = list(x)
        if len(parts) != n_models:
            raise ValueError(f"{name} must hold one tensor per model ({n_models}), got {len(parts)}")
        for k, part in enumerate(parts):
            _tensor(f"{name}[{k}]", part, shape=(None if k == 0 else parts[0].shape[0], d))
        sizes.append(int(parts[0].shape[0]))
    if sizes[0] != sizes[1]:
        raise ValueError(f"images and texts must hold as many rows, got {sizes[0]} and {sizes[1]}")


def encode(theta_v: torch.Tensor, theta_l: torch.Tensor,
           images: torch.Tensor | Sequence[torch.Tensor],
           texts: torch.Tensor | Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """L2-normalised embeddings ``(P, n, 32)`` of ``n`` images and ``n`` texts under ``P`` models.

    ``theta_v`` and ``theta_l`` are ``(P, DIM_V)`` and ``(P, DIM_L)``, finite.
    ``images``/``texts`` are shared by all models (``(n, d)``) or per model (``(P, n, d)``, or a
    sequence of ``P`` tensors ``(n, d)``), finite, with ``n >= 1``.
    """
    _check_inputs(images, texts, _check_params(theta_v, theta_l))
    return _encode(theta_v, theta_l, images, texts)


def _encode(theta_v: torch.Tensor, theta_l: torch.Tensor,
            images: torch.Tensor | Sequence[torch.Tensor],
            texts: torch.Tensor | Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    # unchecked: the evaluation encodes models that may have diverged (they score NaN)
    return _encode_layers(_unflat(theta_v, _V_SHAPES), _unflat(theta_l, _L_SHAPES), images, texts)


def _encode_layers(layers_v: Sequence[torch.Tensor], layers_l: Sequence[torch.Tensor],
                   images: torch.Tensor | Sequence[torch.Tensor],
                   texts: torch.Tensor | Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    w1, b1, w2, b2 = layers_v
    w, b = layers_l
    h = torch.relu(_input_layer(images, w1) + b1[:, None])
    v = h @ w2 + b2[:, None]
    t = _input_layer(texts, w) + b[:, None]
    return torch.nn.functional.normalize(v, dim=-1), torch.nn.functional.normalize(t, dim=-1)


def _infonce(v: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    logits = v @ t.transpose(1, 2) / TEMPERATURE
    target = torch.arange(logits.shape[1]).expand(logits.shape[0], -1)
    ce = torch.nn.functional.cross_entropy
    return (ce(logits.transpose(1, 2), target, reduction="none").mean(1)
            + ce(logits, target, reduction="none").mean(1)).sum() / 2


def contrastive_loss(theta_v: torch.Tensor, theta_l: torch.Tensor,
                     images: torch.Tensor | Sequence[torch.Tensor],
                     texts: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
    """Symmetric InfoNCE (``amd-eq-infonce``), summed over the ``P`` models (each model's own loss
    is a mean over its pairs, so its gradient is the one it would get alone). The arguments are
    those of :func:`encode`."""
    return _infonce(*encode(theta_v, theta_l, images, texts))


def _layer_grads(theta_v: torch.Tensor, theta_l: torch.Tensor,
                 images: torch.Tensor | Sequence[torch.Tensor],
                 texts: torch.Tensor | Sequence[torch.Tensor],
                 create_graph: bool = False) -> tuple[torch.Tensor, ...]:
    """The gradient of :func:`contrastive_loss` for each layer tensor of ``_V_SHAPES`` then
    ``_L_SHAPES``, each ``(P, *shape)`` (``theta_*`` must require grad)."""
    layers_v, layers_l = _unflat(theta_v, _V_SHAPES), _unflat(theta_l, _L_SHAPES)
    return torch.autograd.grad(_infonce(*_encode_layers(layers_v, layers_l, images, texts)),
                               (*layers_v, *layers_l), create_graph=create_graph)


def contrastive_grad(theta_v: torch.Tensor, theta_l: torch.Tensor,
                     images: torch.Tensor | Sequence[torch.Tensor],
                     texts: torch.Tensor | Sequence[torch.Tensor],
                     create_graph: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradient of :func:`contrastive_loss` with respect to ``theta_V`` and ``theta_L``
    (``theta_*`` must require grad), ``(P, DIM_V)`` and ``(P, DIM_L)``.

    It is taken layer by layer and concatenated: the same numbers as
    ``torch.autograd.grad(contrastive_loss(...), (theta_v, theta_l))``, without the flat
    tensor's backward, which writes each layer's gradient into a zeroed copy of the whole
    ``(P, D)`` parameter and adds the copies up. The arguments are those of :func:`encode`.
    """
    _check_inputs(images, texts, _check_params(theta_v, theta_l))
    return _contrastive_grad(theta_v, theta_l, images, texts, create_graph)


def _contrastive_grad(theta_v: torch.Tensor, theta_l: torch.Tensor,
                      images: torch.Tensor | Sequence[torch.Tensor],
                      texts: torch.Tensor | Sequence[torch.Tensor],
                      create_graph: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`contrastive_grad` once its arguments are checked (all but ``requires_grad``)."""
    for name, theta in (("theta_v", theta_v), ("theta_l", theta_l)):
        if not theta.requires_grad:
            raise ValueError(f"{name} must require grad (theta.requires_grad_(True))")
    grads = _layer_grads(theta_v, theta_l, images, texts, create_graph)
    n, k = theta_v.shape[0], len(_V_SHAPES)
    return (torch.cat([g.reshape(n, -1) for g in grads[:k]], 1),
            torch.cat([g.reshape(n, -1) for g in grads[k:]], 1))


def _sgd_step(theta_v: torch.Tensor, theta_l: torch.Tensor, images: torch.Tensor,
              texts: torch.Tensor, lr_v: float | torch.Tensor, lr_l: float | torch.Tensor) -> None:
    """One SGD step on :func:`contrastive_loss`, in place: ``theta <- theta - lr * grad`` layer by
    layer (``lr``: a float or one rate per model, ``(P, 1)``), the numbers of
    ``theta - lr * contrastive_grad(...)``."""
    theta_v.requires_grad_(True)
    theta_l.requires_grad_(True)
    grads = _layer_grads(theta_v, theta_l, images, texts)
    theta_v.requires_grad_(False)
    theta_l.requires_grad_(False)
    layers = (*_unflat(theta_v, _V_SHAPES), *_unflat(theta_l, _L_SHAPES))
    for k, (layer, g) in enumerate(zip(layers, grads, strict=True)):
        lr = lr_v if k < len(_V_SHAPES) else lr_l
        if isinstance(lr, torch.Tensor):
            lr = lr.reshape(-1, *([1] * (g.dim() - 1)))
        layer.sub_(lr * g)


# ---------------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------------


def retrieval_recall(img_emb: torch.Tensor, txt_emb: torch.Tensor,
                     ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """Recall@K in percent for paired embeddings ``(n, d)`` (row ``i`` of each is a pair).

    ``IR@K`` (image retrieval): a caption queries the ``n`` images, a hit when its own image is
    among the top ``K``. ``TR@K`` (text retrieval): an image queries the captions. A tie counts in
    the query's favour (identical captions have identical embeddings, so any copy of the true
    caption is a hit, as "any of the five captions" in Flickr30k). ``RSUM`` is the sum of the six.
    """
    if img_emb.ndim != 2 or img_emb.shape != txt_emb.shape:
        raise ValueError(f"img_emb and txt_emb must be (n, d) of the same shape, got "
                         f"{tuple(img_emb.shape)} and {tuple(txt_emb.shape)}")
    if not (torch.isfinite(img_emb).all() and torch.isfinite(txt_emb).all()):
        # a NaN similarity compares False with everything and would rank first: refuse it
        raise ValueError("img_emb and txt_emb must be finite (did the model diverge?)")
    ks = [check_int("k", k, 1, img_emb.shape[0]) for k in ks]
    sim = img_emb @ txt_emb.T  # sim[i, j]: image i against caption j
    own = sim.diagonal()
    # rank = how many candidates score strictly higher than the true one
    rank_img = (sim > own[None, :]).sum(0)  # caption j queries the images (column j)
    rank_txt = (sim > own[:, None]).sum(1)  # image i queries the captions (row i)
    out = {}
    for k in ks:
        out[f"IR@{k}"] = 100.0 * float((rank_img < k).float().mean())
    for k in ks:
        out[f"TR@{k}"] = 100.0 * float((rank_txt < k).float().mean())
    out["RSUM"] = sum(out.values())
    return out


# ---------------------------------------------------------------------------------------------
# experts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trajectories:
    """Expert checkpoints: ``v[e, t]`` and ``l[e, t]`` are expert ``e``'s image and text parameters
    after ``t`` epochs (``t = 0`` is the initialisation), ``amd-eq-trajectory``."""

    v: torch.Tensor
    l: torch.Tensor  # noqa: E741 - the text branch is L in the paper

    @property
    def n_experts(self) -> int:
        return int(self.v.shape[0])

    @property
    def epochs(self) -> int:
        return int(self.v.shape[1]) - 1

    def movement(self) -> dict[str, np.ndarray]:
        """Per-epoch movement of each branch, ``||theta_e^(t) - theta_e^(t-1)||`` averaged over the
        experts (``t = 1..E``), and the linear-kernel MMD of ``amd-eq-mmd`` (the distance between
        the experts' mean parameters at consecutive epochs)."""
        out = {}
        for name, th in (("V", self.v), ("L", self.l)):
            out[f"move_{name}"] = (th[:, 1:] - th[:, :-1]).norm(dim=2).mean(0).numpy()
            mean = th.mean(0)
            out[f"mmd_{name}"] = (mean[1:] - mean[:-1]).norm(dim=1).numpy()
        return out


def train_experts(data: PairedDigits, n_experts: int = 6, epochs: int = 15, batch_size: int = 64,
                  lr: float = 0.1, lr_text: float | None = None, seed: int = 0) -> Trajectories:
    """Train ``n_experts`` dual encoders on the training pairs with SGD and symmetric InfoNCE,
    saving both branches after every epoch (``amd-eq-trajectory``). ``lr_text`` (default ``lr``)
    is the text branch's rate. The experts train together as one batch of independent models, each
    with its own initialisation and its own minibatch order."""
    n_experts = check_int("n_experts", n_experts, 1)
    epochs = check_int("epochs", epochs, 1)
    batch_size = check_int("batch_size", batch_size, 2)
    lr = check_range("lr", lr, 0, low_open=True)
    lr_l = lr if lr_text is None else check_range("lr_text", lr_text, 0, low_open=True)
    gen = torch.Generator().manual_seed(check_seed(seed))
    x, t = data.tensors("train")
    n = x.shape[0]
    theta_v, theta_l = init_params(n_experts, gen)
    vs, ls = [theta_v.clone()], [theta_l.clone()]
    for _ in range(epochs):
        order = torch.stack([torch.randperm(n, generator=gen) for _ in range(n_experts)])
        for start in range(0, n - batch_size + 1, batch_size):
            idx = order[:, start:start + batch_size]
            _sgd_step(theta_v, theta_l, x[idx], t[idx], lr, lr_l)
        vs.append(theta_v.clone())
        ls.append(theta_l.clone())
    return Trajectories(torch.stack(vs, 1), torch.stack(ls, 1))


def async_ranges(traj: Trajectories, expert_epochs: int = 2) -> dict[str, object]:
    """AMD's MMD dynamic-sampling rule (``amd-eq-ranges``) for the start ranges ``R_V``, ``R_L``.

    ``r_t = MMD_V,t / MMD_L,t``; ``R_V = min{t : r_t > median r}``, ``R_L = max{t : r_t <= median r}``
    (``R_V_rule``, ``R_L_rule``), both capped at ``E - M`` so that ``t + M <= E``. The rule as
    transcribed does not ensure ``R_V > R_L``; when it does not hold, the fallback (inferred,
    labelled ``"fallback"``) sets ``R_L`` to the first epoch where the text branch's movement falls
    below half its first-epoch value, and ``R_V = E - M``.
    """
    m = check_int("expert_epochs", expert_epochs, 1, traj.epochs - 1)
    mv = traj.movement()
    ratio = mv["mmd_V"] / (mv["mmd_L"] + 1e-12)
    t = np.arange(1, traj.epochs + 1)
    med = float(np.median(ratio))
    cap = traj.epochs - m
    # the rule as written (reported as is); the ranges it sets are capped so that t + M <= E
    r_v_rule = int(t[ratio > med].min()) if (ratio > med).any() else traj.epochs
    r_l_rule = int(t[ratio <= med].max())
    rule = "MMD rule"
    r_v, r_l = min(r_v_rule, cap), min(r_l_rule, cap)
    if r_v <= r_l:
        rule = "fallback"
        below = t[mv["move_L"] < 0.5 * mv["move_L"][0]]
        r_l = int(min(below.min(), cap)) if len(below) else cap
        r_v = cap
    return {"R_V": r_v, "R_L": r_l, "rule": rule, "R_V_rule": r_v_rule, "R_L_rule": r_l_rule,
            "ratio": ratio, "median": med}


# ---------------------------------------------------------------------------------------------
# coresets and SPM
# ---------------------------------------------------------------------------------------------


def random_subset(data: PairedDigits, n_pairs: int, seed: int = 0) -> np.ndarray:
    """``n_pairs`` training pairs drawn uniformly without replacement (row ids into ``data``)."""
    n_pairs = check_int("n_pairs", n_pairs, 1, len(data.train))
    return np.sort(np.random.default_rng(check_seed(seed)).choice(data.train, n_pairs,
                                                                  replace=False))


def stratified_subset(data: PairedDigits, n_pairs: int, seed: int = 0) -> np.ndarray:
    """``n_pairs`` training pairs with the digit classes as equal as possible (a random class
    gets each leftover pair), drawn at random within each class."""
    n_pairs = check_int("n_pairs", n_pairs, 1, len(data.train))
    rng = np.random.default_rng(check_seed(seed))
    labels = data.labels[data.train]
    classes = np.unique(labels)
    counts = np.full(len(classes), n_pairs // len(classes))
    counts[rng.choice(len(classes), n_pairs % len(classes), replace=False)] += 1
    picks = [rng.choice(data.train[labels == c], k, replace=False)
             for c, k in zip(classes, counts, strict=True) if k]
    return np.sort(np.concatenate(picks))


def kmeans_prototypes(data: PairedDigits, theta_v: torch.Tensor, theta_l: torch.Tensor,
                      n_pairs: int, seed: int = 0) -> np.ndarray:
    """SPM initialisation (``amd-eq-spm``): k-means with ``K = n_pairs`` on the joint features
    ``[v_i; l_i]`` of the training pairs under a trained encoder ``(theta_V, theta_L)`` (one model,
    shapes ``(DIM_V,)``/``(DIM_L,)``), each modality L2-normalised so neither dominates; returns
    the training pair nearest each centroid (distinct pairs; with ``K = N`` every pair)."""
    from sklearn.cluster import KMeans

    _tensor("theta_v", theta_v, shape=(DIM_V,))
    _tensor("theta_l", theta_l, shape=(DIM_L,))
    n_pairs = check_int("n_pairs", n_pairs, 1, len(data.train))
    seed = check_seed(seed)
    x, t = data.tensors("train")
    with torch.no_grad():
        v, lt = _encode(theta_v.reshape(1, -1), theta_l.reshape(1, -1), x, t)
    feats = torch.cat([v[0], lt[0]], 1).numpy().astype(np.float64)
    km = KMeans(n_clusters=n_pairs, n_init=1, random_state=seed).fit(feats)
    dist = ((feats[None] - km.cluster_centers_[:, None]) ** 2).sum(-1)  # (K, N)
    chosen: list[int] = []
    taken = np.zeros(len(feats), bool)
    # each centroid takes its nearest pair not already taken (closest centroids choose first)
    for c in np.argsort(dist.min(1)):
        j = int(np.argmin(np.where(taken, np.inf, dist[c])))
        taken[j] = True
        chosen.append(j)
    return np.sort(data.train[chosen])


# ---------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------


def _check_set(images: torch.Tensor, texts: torch.Tensor, names: tuple[str, str]) -> None:
    """A set of pairs: ``images`` ``(n, 64)`` and ``texts`` ``(n, 32)``, finite, ``n >= 1``."""
    _tensor(names[0], images, shape=(None, IMG_DIM))
    _tensor(names[1], texts, shape=(images.shape[0], TEXT_DIM))


def _check_sets(sets: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> None:
    if not sets:
        raise ValueError("sets must hold at least one (images, texts) pair")
    for i, (x, t) in enumerate(sets):
        _check_set(x, t, (f"sets[{i}] images", f"sets[{i}] texts"))


def _check_lrs(lrs: Sequence[float]) -> list[float]:
    if not lrs:
        raise ValueError("lrs must hold at least one learning rate")
    return [check_range("lrs", r, 0, low_open=True) for r in lrs]


def train_on_set(images: torch.Tensor, texts: torch.Tensor, lrs: Sequence[float], steps: int,
                 gen: torch.Generator, n_inits: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh dual encoders trained with full-batch SGD on a small set, one per (lr, init):
    returns ``(theta_V, theta_L)`` with ``len(lrs) * n_inits`` rows, lr-major.

    ``images`` ``(n, 64)`` and ``texts`` ``(n, 32)`` are finite; every rate in ``lrs`` is in
    ``(0, inf)``; ``steps >= 1`` and ``n_inits >= 1``.
    """
    _check_set(images, texts, ("images", "texts"))
    return train_on_sets([(images, texts)], lrs, steps, gen, n_inits)


def train_on_sets(sets: Sequence[tuple[torch.Tensor, torch.Tensor]], lrs: Sequence[float],
                  steps: int, gen: torch.Generator,
                  n_inits: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`train_on_set` for several ``(images, texts)`` sets of one size at once, stacked.

    Every set's models start from the same ``len(lrs) * n_inits`` initialisations (drawn once
    from ``gen``), as :func:`train_on_set` called per set with a generator in the same state;
    returns ``(theta_V, theta_L)`` with ``len(sets) * len(lrs) * n_inits`` rows, set-major, then
    lr-major. Each set's rows equal its own :func:`train_on_set` to the bit
    (``tests/data/test_amd_batched.py``). The arguments are those of :func:`train_on_set`.
    """
    _check_sets(sets)
    if len({(*x.shape, *t.shape) for x, t in sets}) > 1:
        raise ValueError("sets must all have the same size (train sets of several sizes with "
                         "evaluate_sets, which groups them)")
    lrs = _check_lrs(lrs)
    steps = check_int("steps", steps, 1)
    n_inits = check_int("n_inits", n_inits, 1)
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
    lr = torch.tensor([float(r) for r in lrs for _ in range(n_inits)])[:, None]
    theta_v, theta_l = init_params(len(lr), gen)
    if len(sets) == 1:
        images, texts = sets[0][0].detach(), sets[0][1].detach()  # shared by the set's models
    else:
        # one copy of the set per model: (len(sets) * len(lr), n, d)
        images = torch.cat([x.detach().expand(len(lr), *x.shape) for x, _ in sets])
        texts = torch.cat([t.detach().expand(len(lr), *t.shape) for _, t in sets])
        lr, theta_v, theta_l = (z.repeat(len(sets), 1) for z in (lr, theta_v, theta_l))
    for _ in range(steps):
        _sgd_step(theta_v, theta_l, images, texts, lr, lr)
    return theta_v, theta_l


def _recalls(theta_v: torch.Tensor, theta_l: torch.Tensor, images: torch.Tensor,
             texts: torch.Tensor) -> list[dict[str, float]]:
    with torch.no_grad():
        v, t = _encode(theta_v, theta_l, images, texts)
    nan = dict.fromkeys(("IR@1", "IR@5", "IR@10", "TR@1", "TR@5", "TR@10", "RSUM"), math.nan)
    # a model that diverged scores NaN, so the rate selection below never picks it
    return [retrieval_recall(v[p], t[p]) if bool(torch.isfinite(v[p]).all() and torch.isfinite(t[p]).all())
            else dict(nan) for p in range(v.shape[0])]


def evaluate_set(data: PairedDigits, images: torch.Tensor, texts: torch.Tensor, *,
                 lrs: Sequence[float] = LR_GRID, n_inits: int = 3, steps: int = 150,
                 seed: int = 0) -> dict[str, float]:
    """Train fresh models on a set of pairs and report test recall at the validation-chosen rate.

    For every rate in ``lrs`` (the same grid for every set, coresets and distilled sets alike),
    ``n_inits`` fresh models train ``steps`` full-batch SGD steps on ``(images, texts)``; the rate
    whose models have the best mean validation RSUM is kept, and its models' mean test recalls are
    returned (with ``lr``, the rate chosen). A rate at which any model diverges is never chosen.

    ``images`` ``(n, 64)`` and ``texts`` ``(n, 32)`` are finite; every rate in ``lrs`` is in
    ``(0, inf)``; ``n_inits >= 1``, ``steps >= 1``, ``seed`` in ``[0, 2**32 - 1]``.
    """
    _check_set(images, texts, ("images", "texts"))
    return evaluate_sets(data, [(images, texts)], lrs=lrs, n_inits=n_inits, steps=steps,
                         seed=seed)[0]


def rate_sweep(data: PairedDigits, images: torch.Tensor, texts: torch.Tensor, *,
               lrs: Sequence[float] = LR_GRID, n_inits: int = 3, steps: int = 150,
               seed: int = 0) -> list[dict[str, float]]:
    """``[evaluate_set(data, images, texts, lrs=(lr,), ...) for lr in lrs]``, the same numbers:
    the test recall of ``(images, texts)`` at each rate on its own (no selection), every rate's
    ``n_inits`` models starting from the same initialisations and all of them trained together.
    The arguments are those of :func:`evaluate_set`."""
    _check_set(images, texts, ("images", "texts"))
    n_inits = check_int("n_inits", n_inits, 1)
    steps = check_int("steps", steps, 1)
    lrs = _check_lrs(lrs)
    gen = torch.Generator().manual_seed(check_seed(seed))
    theta_v, theta_l = (z.repeat(len(lrs), 1) for z in init_params(n_inits, gen))
    lr = torch.tensor([float(r) for r in lrs for _ in range(n_inits)])[:, None]
    for _ in range(steps):
        _sgd_step(theta_v, theta_l, images.detach(), texts.detach(), lr, lr)
    val = _recalls(theta_v, theta_l, *data.tensors("val"))
    test = _recalls(theta_v, theta_l, *data.tensors("test"))
    out = []
    for i, r in enumerate(lrs):
        mine = test[i * n_inits:(i + 1) * n_inits]
        res = {m: float(np.mean([x[m] for x in mine])) for m in mine[0]}
        res["lr"] = r
        res["val_RSUM"] = float(np.mean([x["RSUM"] for x in val[i * n_inits:(i + 1) * n_inits]]))
        out.append(res)
    return out


def evaluate_sets(data: PairedDigits, sets: Sequence[tuple[torch.Tensor, torch.Tensor]], *,
                  lrs: Sequence[float] = LR_GRID, n_inits: int = 3, steps: int = 150,
                  seed: int = 0) -> list[dict[str, float]]:
    """:func:`evaluate_set` of each ``(images, texts)`` set, the sets of one size trained
    together (:func:`train_on_sets`); each result equals that set's own :func:`evaluate_set`
    (whose arguments these are, ``sets`` a sequence of its ``(images, texts)``)."""
    _check_sets(sets)
    n_inits = check_int("n_inits", n_inits, 1)
    steps = check_int("steps", steps, 1)
    lrs = _check_lrs(lrs)
    seed = check_seed(seed)
    out: list[dict[str, float]] = [{} for _ in sets]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (x, t) in enumerate(sets):
        groups.setdefault((*x.shape, *t.shape), []).append(i)
    k = len(lrs) * n_inits
    for members in groups.values():
        gen = torch.Generator().manual_seed(seed)
        theta_v, theta_l = train_on_sets([sets[i] for i in members], lrs, steps, gen, n_inits)
        val = _recalls(theta_v, theta_l, *data.tensors("val"))
        best: list[tuple[int, float]] = []
        keep: list[int] = []
        for g in range(len(members)):
            val_rsum = [np.mean([val[g * k + i * n_inits + j]["RSUM"] for j in range(n_inits)])
                        for i in range(len(lrs))]
            b = int(np.nanargmax(np.nan_to_num(val_rsum, nan=-1.0)))
            best.append((b, float(val_rsum[b])))
            keep += range(g * k + b * n_inits, g * k + (b + 1) * n_inits)
        test = _recalls(theta_v[keep], theta_l[keep], *data.tensors("test"))
        for g, i in enumerate(members):
            mine = test[g * n_inits:(g + 1) * n_inits]
            res = {m: float(np.mean([r[m] for r in mine])) for m in mine[0]}
            res["lr"] = lrs[best[g][0]]
            res["val_RSUM"] = best[g][1]
            out[i] = res
    return out


# ---------------------------------------------------------------------------------------------
# trajectory matching
# ---------------------------------------------------------------------------------------------


def _check_matching(*tensors: torch.Tensor) -> None:
    names = ("student_v", "student_l", "start_v", "start_l", "target_v", "target_l")
    for name, x in zip(names, tensors, strict=True):
        _tensor(name, x)
    for b in (0, 1):  # the image branch, then the text branch
        shapes = [tuple(x.shape) for x in tensors[b::2]]
        if len(set(shapes)) > 1:
            raise ValueError(f"{', '.join(names[b::2])} must share one shape, got "
                             f"{', '.join(map(str, shapes))}")


def matching_loss(student_v: torch.Tensor, student_l: torch.Tensor, start_v: torch.Tensor,
                  start_l: torch.Tensor, target_v: torch.Tensor,
                  target_l: torch.Tensor) -> torch.Tensor:
    """Normalised parameter matching (``amd-eq-match``): for each branch, the squared distance of
    the student's end point to the expert's target over the squared length of the expert's segment,
    summed over the two branches (2 when the student has not moved). The three tensors of a branch
    share one shape and are finite."""
    _check_matching(student_v, student_l, start_v, start_l, target_v, target_l)
    return _matching_loss(student_v, student_l, start_v, start_l, target_v, target_l)


def _matching_loss(student_v: torch.Tensor, student_l: torch.Tensor, start_v: torch.Tensor,
                   start_l: torch.Tensor, target_v: torch.Tensor,
                   target_l: torch.Tensor) -> torch.Tensor:
    """:func:`matching_loss` without its checks."""

    def part(s: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ((s - b) ** 2).sum() / ((a - b) ** 2).sum().clamp_min(1e-12)

    return part(student_v, start_v, target_v) + part(student_l, start_l, target_l)


class _Adam:
    """``torch.optim.Adam(params, lr)`` with its defaults (betas 0.9, 0.999; eps 1e-8; no weight
    decay), the single-tensor update torch runs on a CPU, written out: the same numbers to the
    bit (``tests/data/test_amd_batched.py``). ``torch.optim`` imports ``torch._dynamo`` on an
    optimiser's first use, about a second of CPU, more than the chapter's whole outer loop spends
    in the optimiser."""

    def __init__(self, params: Sequence[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params, self.lr, self.betas, self.eps = list(params), lr, betas, eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        self.steps += 1
        bias_correction1 = 1 - beta1 ** float(self.steps)
        bias_correction2_sqrt = (1 - beta2 ** float(self.steps)) ** 0.5
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            if p.grad is None:
                continue
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denom = (v.sqrt() / bias_correction2_sqrt).add_(self.eps)
            p.addcdiv_(m, denom, value=-(self.lr / bias_correction1))


@dataclass(frozen=True)
class DistillResult:
    """A distilled set: ``images`` (B, 64), ``texts`` (B, 32) in the frozen text embedding space,
    the learned student rates ``lr_v``/``lr_l``, the pairs it started from (``init_rows``), the
    start ranges used, and the matching loss of each outer iteration (``losses``)."""

    images: torch.Tensor
    texts: torch.Tensor
    lr_v: float
    lr_l: float
    init_rows: np.ndarray
    ranges: tuple[int, int]
    losses: np.ndarray


def distill(data: PairedDigits, experts: Trajectories, *, method: str = "mtt", n_pairs: int = 20,
            init: str = "random", iterations: int = 300, syn_steps: int = 10,
            expert_epochs: int = 2, sync_range: int | None = None, ranges: tuple[int, int] | None = None,
            lr_data: float = 1e-2, lr_student: float = 0.1, seed: int = 0) -> DistillResult:
    """Distil ``n_pairs`` image-text pairs by trajectory matching (``amd-eq-match``).

    Each outer iteration takes the next expert (in a seeded random order), draws the start epochs,
    runs ``syn_steps`` full-batch SGD steps of the student from the expert's checkpoint on the
    synthetic pairs with the learnable rates ``eta_V``, ``eta_L``, keeps the graph, and takes one
    Adam step on the synthetic images, synthetic text embeddings and ``log eta`` against the
    matching loss.

    * ``method="mtt"``: synchronous, one start ``s ~ U{0..sync_range}`` for both branches
      (``amd-eq-sync``), as MTT-VL and LoRS (default ``sync_range``: ``min(5, E - M)``);
    * ``method="amd"``: asynchronous, ``t_V ~ U{0..R_V}`` and ``t_L ~ U{0..R_L}`` drawn
      independently (``amd-eq-async``), with ``(R_V, R_L) = ranges`` or, if ``None``, from
      :func:`async_ranges`.

    ``init`` is ``"random"`` (real pairs drawn at random) or ``"kmeans"`` (SPM,
    :func:`kmeans_prototypes` on the first expert's end point). This is one run of
    :func:`distill_many`, which gives the same result for it when it runs beside others.
    """
    return distill_many(data, experts, [(method, init, seed)], n_pairs=n_pairs,
                        iterations=iterations, syn_steps=syn_steps, expert_epochs=expert_epochs,
                        sync_range=sync_range, ranges=ranges, lr_data=lr_data,
                        lr_student=lr_student)[0]


def distill_many(data: PairedDigits, experts: Trajectories,
                 runs: Sequence[tuple[str, str, int] | tuple[str, str, int, tuple[int, int]]
                                | tuple[str, str, int, int]], *,
                 n_pairs: int = 20, iterations: int = 300, syn_steps: int = 10,
                 expert_epochs: int = 2, sync_range: int | None = None,
                 ranges: tuple[int, int] | None = None, lr_data: float = 1e-2,
                 lr_student: float = 0.1, initial_rows: Sequence[np.ndarray | None] | None = None,
                 ) -> list[DistillResult]:
    """Independent distillations, one per ``(method, init, seed)`` in ``runs``, stacked (see
    :func:`distill` for the arguments and the algorithm).

    The ``P = len(runs)`` students are one batch of dual encoders (``(P, D)`` parameters, each with
    its own synthetic pairs, learnable rates, expert order and start epochs from its own
    ``seed``); their matching losses are summed, so each gets the gradient it would get alone, and
    each run has its own Adam optimiser over its own tensors. A run's result is the one
    :func:`distill` gives for it alone, to the bit where the batched matrix products round as the
    single ones (``tests/data/test_amd_batched.py``). ``initial_rows`` optionally gives each run
    its starting pairs (``None`` entries: picked by its ``init``), e.g. SPM prototypes computed
    once for several runs. An ``"amd"`` run may carry its own ranges as a fourth entry,
    ``(method, init, seed, (R_V, R_L))``, in place of ``ranges``, and an ``"mtt"`` run its own
    synchronous range, ``(method, init, seed, R)`` in place of ``sync_range``, so that runs over
    different ranges share one batch.
    """
    if not runs:
        raise ValueError("runs must hold at least one (method, init, seed)")
    n_pairs = check_int("n_pairs", n_pairs, 1, len(data.train))
    iterations = check_int("iterations", iterations, 1)
    syn_steps = check_int("syn_steps", syn_steps, 0)
    m = check_int("expert_epochs", expert_epochs, 1, experts.epochs - 1)
    sync_range = (min(5, experts.epochs - m) if sync_range is None
                  else check_int("sync_range", sync_range, 0, experts.epochs - m))
    lr_data = check_range("lr_data", lr_data, 0, low_open=True)
    lr_student = check_range("lr_student", lr_student, 0, low_open=True)
    if initial_rows is not None and len(initial_rows) != len(runs):
        raise ValueError(f"initial_rows must have one entry per run ({len(runs)}), "
                         f"got {len(initial_rows)}")
    methods, seeds, span, rows_of = [], [], [], []
    for k, run in enumerate(runs):
        if len(run) not in (3, 4):
            raise ValueError(f"runs[{k}] must be (method, init, seed) or (method, init, seed, "
                             f"ranges), got {run!r}")
        method, init, seed = run[0], run[1], run[2]
        own = run[3] if len(run) == 4 else None
        methods.append(check_choice("method", method, ("mtt", "amd")))
        check_choice("init", init, ("random", "kmeans"))
        seeds.append(check_seed(seed))
        cap = experts.epochs - m
        if method == "mtt":
            if own is not None and not isinstance(own, int | np.integer):
                raise ValueError(f"runs[{k}]: only an 'amd' run takes its own ranges (an 'mtt' "
                                 f"run takes one sync range, an integer), got {run!r}")
            own_sync = sync_range if own is None else check_int(f"runs[{k}] sync range", own, 0, cap)
            span.append((own_sync, own_sync))
        elif isinstance(own, int | np.integer):
            raise ValueError(f"runs[{k}]: an 'amd' run takes its own ranges as (R_V, R_L), "
                             f"got {run!r}")
        elif (run_ranges := ranges if own is None else own) is None:
            rr = async_ranges(experts, m)
            span.append((int(rr["R_V"]), int(rr["R_L"])))  # type: ignore[call-overload]
        else:
            span.append((check_int("ranges[0]", run_ranges[0], 0, cap),
                         check_int("ranges[1]", run_ranges[1], 0, cap)))
        given = None if initial_rows is None else initial_rows[k]
        if given is not None:
            rows_of.append(np.asarray(given))
        else:
            rows_of.append(kmeans_prototypes(data, experts.v[0, -1], experts.l[0, -1], n_pairs, seed)
                           if init == "kmeans" else random_subset(data, n_pairs, seed))
    n_runs = len(runs)
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    images = [torch.from_numpy(data.images[r]).clone().requires_grad_(True) for r in rows_of]
    texts = [torch.from_numpy(data.texts[r]).clone().requires_grad_(True) for r in rows_of]
    log_lrs = [torch.full((2,), math.log(lr_student), requires_grad=True) for _ in runs]
    # one Adam per run over its own tensors: it acts on each run as if it ran alone
    opts = [_Adam([images[p], texts[p], log_lrs[p]], lr=lr_data) for p in range(n_runs)]
    orders = [torch.randperm(experts.n_experts * ((iterations // experts.n_experts) + 1),
                             generator=g) % experts.n_experts for g in gens]
    losses = np.empty((n_runs, iterations))
    # The checks, done once where their answer cannot change: the synthetic pairs are only changed
    # by Adam, after an iteration's inner steps, so they are checked at its first inner step; the
    # experts' checkpoints never change, so when all of them are finite the matching loss checks
    # only the students (any failure takes the full checks, which raise as they always did).
    experts_finite = all(x.is_floating_point() and x.numel() > 0 and _all_finite(x)
                         for x in (experts.v, experts.l))
    for it in range(iterations):
        es, tvs, tls = [], [], []
        for p in range(n_runs):
            es.append(int(orders[p][it]))
            tvs.append(int(torch.randint(0, span[p][0] + 1, (1,), generator=gens[p])))
            # synchronous matching draws one start for both branches (amd-eq-sync)
            tls.append(tvs[p] if methods[p] == "mtt" else
                       int(torch.randint(0, span[p][1] + 1, (1,), generator=gens[p])))
        start_v, start_l = experts.v[es, tvs], experts.l[es, tls]  # (P, D): run p's checkpoints
        th_v, th_l = start_v.clone(), start_l.clone()
        eta = torch.stack([lr.exp() for lr in log_lrs])  # (P, 2)
        for step in range(syn_steps):
            if not th_v.requires_grad:
                th_v.requires_grad_(True)
                th_l.requires_grad_(True)
            # images, texts: one tensor per run (each run's student sees only its own set)
            if step == 0:
                _check_inputs(images, texts, _check_params(th_v, th_l))
            else:
                _check_params(th_v, th_l)
            gv, gl = _contrastive_grad(th_v, th_l, images, texts, create_graph=True)
            th_v, th_l = th_v - eta[:, :1] * gv, th_l - eta[:, 1:] * gl
        students_ok = experts_finite and _all_finite(th_v) and _all_finite(th_l)
        loss = [(_matching_loss if students_ok else matching_loss)(
                    th_v[p], th_l[p], start_v[p], start_l[p], experts.v[es[p], tvs[p] + m],
                    experts.l[es[p], tls[p] + m])
                for p in range(n_runs)]
        for opt in opts:
            opt.zero_grad()
        if loss[0].requires_grad:
            torch.stack(loss).sum().backward()
            for opt in opts:
                opt.step()
        losses[:, it] = [float(v.detach()) for v in loss]
    out = []
    for p in range(n_runs):
        lr_v, lr_l = (float(v) for v in log_lrs[p].detach().exp())
        out.append(DistillResult(images[p].detach().clone(), texts[p].detach().clone(), lr_v, lr_l,
                                 rows_of[p], span[p], losses[p].copy()))
    return out
