"""Seeded multi-task VRP instances, generated with RouteFinder's conventions.

One depot (node 0) and ``n`` customers (nodes 1..n) uniform in the unit square; travel time equals
Euclidean distance. Every variant is CVRP plus a subset of four attributes:

* ``O``  open routes: the return arc into the depot is free;
* ``B``  backhauls: about 20 % of the customers are pickups, served after every delivery of a route
  (``MB``, mixed backhauls, lifts the ordering and is out of distribution);
* ``L``  one route-length limit per instance;
* ``TW`` time windows and service times.

The numbers follow RouteFinder's ``MTVRPGenerator`` (Berto et al., 2025), which CCL trains on:

* capacity ``Q = 30`` for ``n <= 20``, else ``30 + n // 5``; demands are integers 1..9 divided by
  ``Q``, so the vehicle capacity is 1;
* a customer is a backhaul with probability 0.2 (then its delivery is 0 and its pickup is drawn);
* service ``s ~ U[0.15, 0.18]``, window length ``w ~ U[0.18, 0.2]``, horizon ``T = 4.6`` and window
  start ``e = d0 * (1 + (h_max - 1) U)`` with ``h_max = (T - s - w) / d0 - 1``, so every customer is
  reachable straight from the depot and the vehicle can still return by ``T``;
* limit ``L ~ U[2 max d0, max(2.8, 2 max d0 + 1e-6)]``, at least an out-and-back to the farthest
  customer.

All quantities are drawn for every instance, then the variant removes the attributes it does not
have (open -> False, windows -> ``[0, inf)`` with no service time, limit -> ``inf``, backhauls ->
pickups become deliveries). Instances of one seed therefore share their geometry across variants,
which makes per-variant costs comparable instance by instance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from iclr_lab.core.validation import check_choice, check_int

__all__ = ["ATTRIBUTES", "ID_VARIANTS", "MB_VARIANTS", "VARIANTS", "VRPBatch", "capacity_for", "concat",
           "generate", "variant_flags", "variant_name"]

ATTRIBUTES = ("O", "B", "L", "TW")
HORIZON = 4.6  # depot window [0, T] of the time-window variants
BACKHAUL_RATIO = 0.2


def variant_name(open_route: bool, backhaul: bool, limit: bool, tw: bool, mixed: bool = False) -> str:
    """RouteFinder's name of a variant, e.g. ``OVRPBLTW``; ``CVRP`` when no attribute is present."""
    if not (open_route or backhaul or limit or tw):
        return "CVRP"
    b = ("MB" if mixed else "B") if backhaul else ""
    return ("O" if open_route else "") + "VRP" + b + ("L" if limit else "") + ("TW" if tw else "")


def _all_variants(mixed: bool) -> tuple[str, ...]:
    names = []
    for o in (False, True):
        for b in ((True,) if mixed else (False, True)):
            for lim in (False, True):
                for tw in (False, True):
                    names.append(variant_name(o, b, lim, tw, mixed))
    return tuple(names)


ID_VARIANTS: tuple[str, ...] = _all_variants(False)  # the 16 training variants
MB_VARIANTS: tuple[str, ...] = _all_variants(True)  # the 8 mixed-backhaul (out-of-distribution) ones
VARIANTS: tuple[str, ...] = ID_VARIANTS + MB_VARIANTS + ("mixed",)


def variant_flags(variant: str) -> dict[str, bool]:
    """Attributes of a named variant: ``{"O", "B", "MB", "L", "TW"} -> bool``."""
    check_choice("variant", variant, VARIANTS[:-1])
    core = variant[1:] if variant.startswith("O") else variant
    return {"O": variant.startswith("O"), "MB": "MB" in core, "B": "B" in core.replace("MB", ""),
            "L": "L" in core, "TW": "TW" in core}


def capacity_for(n: int) -> int:
    """Vehicle capacity ``Q`` of RouteFinder's generator for ``n`` customers."""
    n = check_int("n", n, 2)
    return 30 if n <= 20 else 30 + n // 5


@dataclass(frozen=True)
class VRPBatch:
    """A batch of instances (tensors with a leading batch dimension ``B``; ``N = n + 1`` nodes).

    Validated at construction (``ValueError`` or ``TypeError`` naming the field): ``B >= 1`` and
    ``N >= 2``, the shapes below, floating-point tensors (``open_route`` bool), finite locations,
    demands in ``[0, 1]``, windows with ``0 <= e <= l`` (``e`` finite), finite service times
    ``>= 0``, limits ``> 0`` (``inf`` allowed), an integer capacity ``>= 1`` and one variant name per
    instance.

    Attributes:
        locs: ``[B, N, 2]`` coordinates, depot first.
        linehaul: ``[B, N]`` delivery demands divided by ``capacity`` (0 at the depot).
        backhaul: ``[B, N]`` pickup demands divided by ``capacity``.
        time_windows: ``[B, N, 2]`` earliest and latest service start (``[0, inf)`` without TW).
        service: ``[B, N]`` service times (0 without TW).
        limit: ``[B]`` route-length limit (``inf`` without L).
        open_route: ``[B]`` bool, open routes.
        mixed_backhaul: True for the MB variants (one class per batch).
        capacity: the integer capacity ``Q`` the demands were divided by.
        variants: the variant name of each instance.
    """

    locs: torch.Tensor
    linehaul: torch.Tensor
    backhaul: torch.Tensor
    time_windows: torch.Tensor
    service: torch.Tensor
    limit: torch.Tensor
    open_route: torch.Tensor
    mixed_backhaul: bool
    capacity: int
    variants: tuple[str, ...]

    def __post_init__(self) -> None:
        # The checker and the solvers compare with these numbers; NaN compares false, so a NaN
        # coordinate or window would otherwise pass as feasible. Refuse bad data here, once.
        if not isinstance(self.locs, torch.Tensor) or self.locs.dim() != 3:
            raise ValueError("VRPBatch.locs must be a [B, N, 2] tensor")
        b, n = int(self.locs.shape[0]), int(self.locs.shape[1])
        if b == 0:  # checked first, so that the error names locs and not the field it mismatches
            raise ValueError(f"VRPBatch.locs must hold at least one instance, got shape "
                             f"{list(self.locs.shape)}")
        shapes = {"locs": (self.locs, (b, n, 2)), "linehaul": (self.linehaul, (b, n)),
                  "backhaul": (self.backhaul, (b, n)), "time_windows": (self.time_windows, (b, n, 2)),
                  "service": (self.service, (b, n)), "limit": (self.limit, (b,)),
                  "open_route": (self.open_route, (b,))}
        for name, (t, shape) in shapes.items():
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"VRPBatch.{name} must be a torch.Tensor, got {type(t).__name__}")
            if tuple(t.shape) != shape:
                raise ValueError(f"VRPBatch.{name} must have shape {list(shape)} (B={b}, N={n}), "
                                 f"got {list(t.shape)}")
            want_bool = name == "open_route"
            if (t.dtype == torch.bool) != want_bool or not (want_bool or t.is_floating_point()):
                raise TypeError(f"VRPBatch.{name} must be a {'bool' if want_bool else 'floating-point'} "
                                f"tensor, got dtype {t.dtype}")
        if n < 2:
            raise ValueError(f"VRPBatch needs a depot and at least one customer, got N={n} nodes")
        check_int("capacity", self.capacity, 1)
        if len(self.variants) != b:
            raise ValueError(f"VRPBatch.variants must name each of the {b} instances, "
                             f"got {len(self.variants)}")

        def bad(name: str, ok: torch.Tensor, what: str) -> None:
            if not bool(ok.all()):
                raise ValueError(f"VRPBatch.{name} must be {what}")

        bad("locs", torch.isfinite(self.locs), "finite (no NaN or inf coordinates)")
        for name in ("linehaul", "backhaul"):
            d = getattr(self, name)
            bad(name, (d >= 0) & (d <= 1), "in [0, 1] (demands divided by the capacity; no NaN)")
        tw = self.time_windows
        bad("time_windows", torch.isfinite(tw[..., 0]) & (tw[..., 0] >= 0) & ~torch.isnan(tw[..., 1])
            & (tw[..., 0] <= tw[..., 1]), "windows [e, l] with 0 <= e <= l, e finite (l may be inf)")
        bad("service", torch.isfinite(self.service) & (self.service >= 0), "finite and >= 0")
        bad("limit", self.limit > 0, "> 0 (inf for no limit; no NaN)")

    @property
    def batch_size(self) -> int:
        """Number of instances ``B``."""
        return int(self.locs.shape[0])

    @property
    def num_nodes(self) -> int:
        """Nodes per instance, depot included (``n + 1``)."""
        return int(self.locs.shape[1])

    def distances(self) -> torch.Tensor:
        """``[B, N, N]`` Euclidean distance matrix."""
        return torch.cdist(self.locs, self.locs)

    def flags(self) -> torch.Tensor:
        """``[B, 4]`` float presence of ``(O, B, L, TW)`` read from the data, not from the name.

        With 20 customers a B instance has no backhaul customer with probability ``0.8**20``; it is
        then a plain CVRP instance and its B flag is 0, as in RouteFinder.
        """
        has_b = (self.backhaul[:, 1:] > 0).any(-1)
        has_l = torch.isfinite(self.limit)
        has_tw = torch.isfinite(self.time_windows[:, 1:, 1]).any(-1)
        return torch.stack([self.open_route, has_b, has_l, has_tw], -1).to(self.locs.dtype)

    def __getitem__(self, index: int | slice | torch.Tensor) -> VRPBatch:
        """Sub-batch (an ``int`` keeps a batch of one)."""
        idx = slice(index, index + 1) if isinstance(index, int) else index
        names = self.variants
        picked = (names[idx] if isinstance(idx, slice)
                  else tuple(names[int(i)] for i in torch.as_tensor(idx).reshape(-1).tolist()))
        return replace(self, locs=self.locs[idx], linehaul=self.linehaul[idx], backhaul=self.backhaul[idx],
                       time_windows=self.time_windows[idx], service=self.service[idx],
                       limit=self.limit[idx], open_route=self.open_route[idx], variants=picked)

    def transform(self, fn: str) -> VRPBatch:
        """Apply one of the 8 symmetries of the unit square (``"id"``, ``"x"``, ``"y"``, ``"xy"``,
        ``"t"``, ``"tx"``, ``"ty"``, ``"txy"``: optional transpose, then reflections). Distances, and
        so every constraint, are unchanged."""
        check_choice("fn", fn, SYMMETRIES)
        x, y = self.locs[..., 0], self.locs[..., 1]
        if fn.startswith("t"):
            x, y = y, x
        if "x" in fn:
            x = 1 - x
        if "y" in fn:
            y = 1 - y
        return replace(self, locs=torch.stack([x, y], -1))

    def to(self, dtype: torch.dtype) -> VRPBatch:
        """The same batch with float tensors cast to ``dtype``."""
        return replace(self, locs=self.locs.to(dtype), linehaul=self.linehaul.to(dtype),
                       backhaul=self.backhaul.to(dtype), time_windows=self.time_windows.to(dtype),
                       service=self.service.to(dtype), limit=self.limit.to(dtype))


SYMMETRIES = ("id", "x", "y", "xy", "t", "tx", "ty", "txy")


def generate(variant: str, n: int, batch: int, seed: int, *, dtype: torch.dtype = torch.float32) -> VRPBatch:
    """Generate ``batch`` instances of ``variant`` with ``n`` customers from ``seed``.

    Args:
        variant: one of ``VARIANTS``: a 16 in-distribution name (``CVRP`` ... ``OVRPBLTW``), a
            mixed-backhaul name (``VRPMB`` ... ``OVRPMBLTW``), or ``"mixed"``: each of O, B, L, TW
            kept independently with probability 1/2 per instance (RouteFinder's mixed batches).
        n: customers per instance, at least 2.
        batch: number of instances, at least 1.
        seed: seed of a private ``torch.Generator`` (the global RNG is not touched).
        dtype: float dtype of the tensors.

    Returns:
        A :class:`VRPBatch`. The same ``(n, batch, seed)`` gives the same locations, demands, windows
        and limits for every variant, each variant keeping only its attributes.
    """
    check_choice("variant", variant, VARIANTS)
    n = check_int("n", n, 2)
    batch = check_int("batch", batch, 1)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    g = torch.Generator().manual_seed(seed)
    q_cap = capacity_for(n)
    locs = torch.rand(batch, n + 1, 2, generator=g, dtype=torch.float64)
    # demands: floor(U[0, 9)) + 1 in {1..9}, independently for delivery and pickup
    lh = torch.randint(1, 10, (batch, n), generator=g).double()
    bh = torch.randint(1, 10, (batch, n), generator=g).double()
    is_back = torch.rand(batch, n, generator=g) < BACKHAUL_RATIO
    lh = torch.where(is_back, 0.0, lh)
    bh = torch.where(is_back, bh, 0.0)
    # time windows (RouteFinder's formula) and service times
    d0 = (locs[:, 1:] - locs[:, :1]).norm(dim=-1)
    s = 0.15 + 0.03 * torch.rand(batch, n, generator=g, dtype=torch.float64)
    w = 0.18 + 0.02 * torch.rand(batch, n, generator=g, dtype=torch.float64)
    h_max = (HORIZON - s - w) / d0 - 1
    early = d0 * (1 + (h_max - 1) * torch.rand(batch, n, generator=g, dtype=torch.float64))
    late = early + w
    # route-length limit
    lo = 2 * d0.max(-1).values
    hi = torch.clamp(lo + 1e-6, min=2.8)
    limit = lo + (hi - lo) * torch.rand(batch, generator=g, dtype=torch.float64)
    open_flag = torch.ones(batch, dtype=torch.bool)
    mixed = variant == "mixed"
    if mixed:
        keep = torch.rand(batch, 4, generator=g) < 0.5  # O, B, L, TW
        mb = False
    else:
        fl = variant_flags(variant)
        keep = torch.tensor([[fl["O"], fl["B"] or fl["MB"], fl["L"], fl["TW"]]]).expand(batch, 4)
        mb = fl["MB"]
    k_o, k_b, k_l, k_tw = (keep[:, i] for i in range(4))
    open_flag = open_flag & k_o
    lh = torch.where(k_b[:, None], lh, lh + bh)  # removing B: every pickup becomes a delivery
    bh = torch.where(k_b[:, None], bh, 0.0)
    limit = torch.where(k_l, limit, math.inf)
    early = torch.where(k_tw[:, None], early, 0.0)
    late = torch.where(k_tw[:, None], late, math.inf)
    s = torch.where(k_tw[:, None], s, 0.0)
    zero = torch.zeros(batch, 1, dtype=torch.float64)
    depot_late = torch.where(k_tw[:, None], torch.full_like(zero, HORIZON), math.inf)
    tws = torch.stack([torch.cat([zero, early], 1), torch.cat([depot_late, late], 1)], -1)
    names = tuple(variant_name(bool(o), bool(b), bool(li), bool(t), mb)
                  for o, b, li, t in keep.tolist())
    return VRPBatch(
        locs=locs.to(dtype), linehaul=torch.cat([zero, lh / q_cap], 1).to(dtype),
        backhaul=torch.cat([zero, bh / q_cap], 1).to(dtype), time_windows=tws.to(dtype),
        service=torch.cat([zero, s], 1).to(dtype), limit=limit.to(dtype), open_route=open_flag.clone(),
        mixed_backhaul=mb, capacity=q_cap, variants=names)


def concat(batches: Sequence[VRPBatch]) -> VRPBatch:
    """One batch holding the instances of ``batches`` in order (same capacity and backhaul class),
    so that instances of several variants decode together."""
    if not batches:
        raise ValueError("batches must hold at least one VRPBatch")
    first = batches[0]
    if any(b.capacity != first.capacity or b.mixed_backhaul != first.mixed_backhaul for b in batches):
        raise ValueError("batches must share their capacity and backhaul class to be concatenated")
    tensors: dict[str, Any] = {f.name: torch.cat([getattr(b, f.name) for b in batches])
                               for f in fields(VRPBatch) if isinstance(getattr(first, f.name), torch.Tensor)}
    return replace(first, **tensors, variants=sum((b.variants for b in batches), ()))
