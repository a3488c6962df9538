"""A batched multi-task VRP environment in torch (RouteFinder's masks and features).

The environment runs ``S`` trajectories for each of ``B`` instances at once (POMO's multiple starts);
every state tensor has shape ``[B, S, ...]`` and the instance tensors are shared by the ``S``
trajectories. A trajectory builds one giant tour: customers, with a depot visit closing each route.

Feasibility of moving from the current node ``c`` to a customer ``j`` (all must hold):

1. ``j`` is not yet visited;
2. TW: arrival ``t + d(c, j) <= l_j``, and on a closed route ``max(arrival, e_j) + s_j + d(j, 0)``
   is at most the depot's window end;
3. L: ``length + d(c, j) + [closed] d(j, 0) <= L``;
4. load, VRPB: a delivery needs ``used deliveries + q_j <= 1`` and that the current node is not a
   pickup (so pickups come last in a route); a pickup needs ``used pickups + p_j <= 1``.
   MB: ``used deliveries + q_j <= 1``, ``used pickups + p_j <= 1`` and ``q_j <= 1 - used pickups``
   (RouteFinder's constructive rule, looser than the true load profile; see the checker).

The depot is always allowed from a customer and forbidden at the depot while a customer is
feasible; once every customer is served only the depot is allowed (finished trajectories stay there
at no cost). Demands are divided by the capacity, which is therefore 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from iclr_lab.core.validation import check_int
from iclr_lab.routing.instances import VRPBatch

__all__ = ["MultiTaskVRPEnv", "VRPState"]

_EPS = 1e-5  # slack on the capacity check: sums of k/Q in float32 may land just above 1
REMAINING_CAP = 10.0  # RouteFinder's stand-in for an infinite remaining length in features


@dataclass
class VRPState:
    """State of ``[B, S]`` trajectories (all tensors indexed ``[b, s]``).

    Attributes:
        current: current node (0 = depot).
        time: time at which the vehicle leaves ``current``.
        length: length of the current route so far.
        used_linehaul: deliveries loaded on the current route (capacity 1).
        used_backhaul: pickups collected on the current route.
        visited: ``[B, S, N]`` bool, customers served (the depot entry is False).
        cost: distance driven so far over all routes, return arcs counted only on closed routes
            (the cost so far, and RGCR's ``c^O`` feature).
        steps: decoding steps taken.
    """

    current: torch.Tensor
    time: torch.Tensor
    length: torch.Tensor
    used_linehaul: torch.Tensor
    used_backhaul: torch.Tensor
    visited: torch.Tensor
    cost: torch.Tensor
    steps: int = 0

    @property
    def done(self) -> torch.Tensor:
        """``[B, S]`` bool: every customer served and the vehicle back at the depot."""
        return self.visited[..., 1:].all(-1) & (self.current == 0)


class MultiTaskVRPEnv:
    """Batched environment for a :class:`~iclr_lab.routing.instances.VRPBatch`.

    Args:
        instances: the instances.
        num_starts: trajectories per instance ``S`` (at least 1).

    Example::

        env = MultiTaskVRPEnv(generate("VRPBLTW", 20, 4, seed=0), num_starts=20)
        state = env.reset()
        state = env.step(state, env.start_nodes())      # trajectory i starts at customer i + 1
        while not bool(state.done.all()):
            mask = env.mask(state)                       # [B, S, N] feasible next nodes
            state = env.step(state, first_feasible(mask))
    """

    def __init__(self, instances: VRPBatch, num_starts: int = 1) -> None:
        if not isinstance(instances, VRPBatch):
            raise TypeError(f"instances must be a VRPBatch, got {type(instances).__name__}")
        self.inst = instances
        self.num_starts = check_int("num_starts", num_starts, 1)
        self.dist = instances.distances()
        self.batch_size = instances.batch_size
        self.num_nodes = instances.num_nodes
        self._d0 = self.dist[:, :, 0]  # [B, N] distance back to the depot
        self._closed = ~instances.open_route  # [B]

    # ----------------------------------------------------------------------------- features
    def node_features(self) -> torch.Tensor:
        """``[B, N, 7]`` customer features ``[x, y, q_L, q_B, e, l, s]`` (infinite -> 0)."""
        i = self.inst
        f = torch.cat([i.locs, i.linehaul[..., None], i.backhaul[..., None], i.time_windows,
                       i.service[..., None]], -1)
        return torch.nan_to_num(f, posinf=0.0)

    def global_features(self) -> torch.Tensor:
        """``[B, 5]`` depot/global features ``[open, x0, y0, L, l_0]`` (infinite -> 0), the
        RouteFinder global attribute embedding's input."""
        i = self.inst
        f = torch.stack([i.open_route.to(i.locs.dtype), i.locs[:, 0, 0], i.locs[:, 0, 1], i.limit,
                         i.time_windows[:, 0, 1]], -1)
        return torch.nan_to_num(f, posinf=0.0)

    def context_features(self, state: VRPState) -> torch.Tensor:
        """``[B, S, 3]`` RouteFinder's dynamic context: available load, time, remaining length
        (``L - length``, infinite -> 10). Available load is ``1 - used pickups`` once a pickup is on
        board, else ``1 - used deliveries``."""
        avail = torch.where(state.used_backhaul > 0, 1 - state.used_backhaul, 1 - state.used_linehaul)
        remaining = self.inst.limit[:, None] - state.length
        remaining = torch.where(torch.isfinite(remaining), remaining,
                                torch.full_like(remaining, REMAINING_CAP))
        return torch.stack([avail, state.time, remaining], -1)

    # ----------------------------------------------------------------------------- dynamics
    def reset(self) -> VRPState:
        """All trajectories at the depot at time 0, nothing visited."""
        b, s, n = self.batch_size, self.num_starts, self.num_nodes
        dt = self.inst.locs.dtype
        z = torch.zeros(b, s, dtype=dt)
        return VRPState(current=torch.zeros(b, s, dtype=torch.long), time=z.clone(), length=z.clone(),
                        used_linehaul=z.clone(), used_backhaul=z.clone(),
                        visited=torch.zeros(b, s, n, dtype=torch.bool), cost=z.clone())

    def start_nodes(self) -> torch.Tensor:
        """``[B, S]`` POMO starts: trajectory ``i`` visits customer ``1 + i mod n`` first."""
        n = self.num_nodes - 1
        return (torch.arange(self.num_starts) % n + 1).expand(self.batch_size, -1).clone()

    def mask(self, state: VRPState) -> torch.Tensor:
        """``[B, S, N]`` bool, True where the next node is feasible (rules in the module docstring)."""
        i = self.inst
        cur = state.current
        d_cj = torch.gather(self.dist, 1, cur[..., None].expand(-1, -1, self.num_nodes))  # [B,S,N]
        early = i.time_windows[:, None, :, 0]
        late = i.time_windows[:, None, :, 1]
        arrive = state.time[..., None] + d_cj
        closed = self._closed[:, None, None]
        d0 = self._d0[:, None, :]
        depot_late = i.time_windows[:, None, 0:1, 1]
        tw_ok = (arrive <= late) & (
            ~closed | (torch.maximum(arrive, early) + i.service[:, None, :] + d0 <= depot_late))
        len_ok = state.length[..., None] + d_cj + torch.where(closed, d0, 0.0) <= i.limit[:, None, None]
        q = i.linehaul[:, None, :]
        p = i.backhaul[:, None, :]
        u_l = state.used_linehaul[..., None]
        u_b = state.used_backhaul[..., None]
        if i.mixed_backhaul:
            load_ok = (u_l + q <= 1 + _EPS) & (u_b + p <= 1 + _EPS) & (q <= 1 - u_b + _EPS)
        else:
            at_pickup = torch.gather(i.backhaul, 1, cur)[..., None] > 0
            load_ok = ((q > 0) & (u_l + q <= 1 + _EPS) & ~at_pickup) | ((p > 0) & (u_b + p <= 1 + _EPS))
        feas = ~state.visited & tw_ok & len_ok & load_ok
        feas[..., 0] = False
        any_customer = feas.any(-1)
        feas[..., 0] = ~((cur == 0) & any_customer)
        return feas

    def step(self, state: VRPState, action: torch.Tensor) -> VRPState:
        """Move every trajectory to ``action`` (``[B, S]`` node indices) and return the new state.
        The action is assumed feasible (the policy samples under :meth:`mask`); it must be an
        integer tensor of the state's shape with node indices in ``[0, N)``, else ValueError or
        TypeError naming ``action``."""
        if not isinstance(action, torch.Tensor) or action.dtype not in (torch.int64, torch.int32):
            kind = action.dtype if isinstance(action, torch.Tensor) else type(action).__name__
            raise TypeError(f"action must be an integer (int64) tensor of node indices, got {kind}")
        if action.shape != state.current.shape:
            raise ValueError(f"action must have the state's shape {list(state.current.shape)} ([B, S]), "
                             f"got {list(action.shape)}")
        if bool(((action < 0) | (action >= self.num_nodes)).any()):
            raise ValueError(f"action must hold node indices in [0, {self.num_nodes - 1}], got values "
                             f"from {int(action.min())} to {int(action.max())}")
        action = action.long()
        i = self.inst
        cur = state.current
        d = torch.gather(self.dist, 1, cur[..., None].expand(-1, -1, self.num_nodes))
        d = torch.gather(d, 2, action[..., None])[..., 0]
        at_customer = action != 0
        free_return = (~at_customer) & i.open_route[:, None]
        early = torch.gather(i.time_windows[..., 0], 1, action)
        svc = torch.gather(i.service, 1, action)
        time = torch.where(at_customer, torch.maximum(state.time + d, early) + svc, 0.0)
        length = torch.where(at_customer, state.length + d, 0.0)
        q = torch.gather(i.linehaul, 1, action)
        p = torch.gather(i.backhaul, 1, action)
        used_l = torch.where(at_customer, state.used_linehaul + q, 0.0)
        used_b = torch.where(at_customer, state.used_backhaul + p, 0.0)
        visited = state.visited.clone()
        visited.scatter_(2, action[..., None], True)
        visited[..., 0] = False
        arc = torch.where(free_return, 0.0, d)
        return VRPState(current=action, time=time, length=length, used_linehaul=used_l, used_backhaul=used_b,
                        visited=visited, cost=state.cost + arc,
                        steps=state.steps + 1)

    def max_steps(self) -> int:
        """Upper bound on decoding steps: each customer once, a depot visit after each."""
        return 2 * (self.num_nodes - 1) + 1
