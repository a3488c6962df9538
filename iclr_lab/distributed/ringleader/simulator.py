"""An event-driven simulator of asynchronous SGD on heterogeneous workers, and the six methods.

The server and ``n`` workers share nothing but messages. A worker that is sent a point computes one
stochastic gradient there and returns it after a time drawn from a time model
(:mod:`~iclr_lab.distributed.ringleader.timing`). The simulator keeps a heap of the workers' finish
times; a method is a plain loop that asks for the next arrival and decides what to do with it
(``ringleader-eq-update``):

* :func:`ringleader`: Ringleader ASGD (the paper's method);
* :func:`malenia`: Malenia SGD (synchronous rounds, in-flight work discarded at each update);
* :func:`rennala`: Rennala SGD (a fixed batch from whoever is fastest; for identical data only);
* :func:`ia2sgd`: IA²SGD (a table of each worker's latest gradient, an update per arrival);
* :func:`naive_asgd`: asynchronous SGD (an update per arrival, with that gradient alone);
* :func:`minibatch_sgd`: synchronous minibatch SGD (one gradient per worker, everyone waits).

Two details matter for faithful simulation. The gradient is evaluated at the point the worker was
*sent*, not at the server's point when it arrives. Ties between finish times are broken by a global
sequence number (first dispatched, first served), never by the worker's index.

The model ``x`` is a batch of rows, one per step size: the arrival schedule never depends on the
iterates, so one pass of the event loop runs a whole grid of step sizes. Each computed gradient
draws one noise vector, shared by every row of the batch (common random numbers). Rows may also
differ in their noise level (``Simulator(..., noise=[...])``): the noise vector is then scaled per
row, so one pass serves two experiments that differ only in ``sigma`` (:meth:`Simulator.rows`
splits the result). Under fixed times the schedule does not depend on the seed either:
:func:`run_seeds` runs several seeds in one pass (:class:`SeedRows`), each seed's rows with their
own problem and noise streams.

The event loop is the cost of a run (hundreds of thousands of arrivals on arrays of a few hundred
floats), so its bookkeeping avoids per-event NumPy calls where the same numbers come out without
them: noise vectors are drawn from each worker's generator in blocks (the same stream, vector by
vector), the delay histogram is built once from the delays it is read from, and idle and wasted
seconds are summed in Python floats (the same additions in the same order).
"""

from __future__ import annotations

import copy
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed
from iclr_lab.distributed.ringleader.timing import AuthorsTimes, FixedTimes, TimeModel

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["METHODS", "GradientTable", "Horizon", "Problem", "Quadratic", "SeedRows", "Simulator", "ia2sgd",
           "malenia", "minibatch_sgd", "naive_asgd", "rennala", "ringleader", "run_method", "run_seeds",
           "simulate", "theory_step"]


class Problem(Protocol):
    """What the simulator needs from a problem (``iclr_lab.core.worker_data.QuadraticToy`` is one).

    ``grad(x, rank)`` is worker ``rank``'s exact gradient and ``grad(x)`` the global one, for ``x``
    of shape ``(..., dim)``; a stochastic gradient adds ``noise`` times a standard normal vector.
    """

    @property
    def dim(self) -> int: ...

    @property
    def n_workers(self) -> int: ...

    @property
    def noise(self) -> float: ...

    @property
    def x0(self) -> np.ndarray: ...

    def grad(self, x: Any, rank: int | None = None) -> Any: ...


@dataclass(frozen=True)
class Quadratic:
    r"""The heterogeneous quadratic of ``ringleader-eq-quadratic``: worker ``i`` holds
    :math:`f_i(x) = \tfrac12 (x - c_i)^\top \mathrm{diag}(\lambda) (x - c_i)`.

    The numbers come from :class:`iclr_lab.core.worker_data.QuadraticToy` (:meth:`from_toy`); this
    class checks them once, when it is built, and evaluates them without per-call argument checks,
    because the simulator calls :meth:`grad` once per gradient, hundreds of thousands of times.

    Attributes:
        eigenvalues: the Hessian's diagonal ``lambda``, ``(dim,)``, finite and >= 0.
        centers: the workers' centres ``c_i``, ``(n_workers, dim)``, finite.
        x_star: the global optimum, ``(dim,)``, finite.
        x0: the start, ``(dim,)``, finite.
        noise: the gradient noise's standard deviation per coordinate, in [0, inf).

    Raises:
        TypeError, ValueError: a field of the wrong shape, empty, not finite, or out of range,
            naming the field. The arrays are stored as float arrays.
    """

    eigenvalues: np.ndarray
    centers: np.ndarray
    x_star: np.ndarray
    x0: np.ndarray
    noise: float
    _rows: list[np.ndarray] = field(init=False, repr=False, compare=False)

    @classmethod
    def from_toy(cls, toy: Any) -> Quadratic:
        """The quadratic of a ``QuadraticToy`` (its eigenvalues, centres, optimum, start, noise)."""
        return cls(np.asarray(toy.eigenvalues, float), np.asarray(toy.centers, float),
                   np.asarray(toy.x_star, float), np.asarray(toy.x0, float), float(toy.noise))

    @property
    def dim(self) -> int:
        return int(self.eigenvalues.size)

    @property
    def n_workers(self) -> int:
        return int(self.centers.shape[0])

    def __post_init__(self) -> None:
        eig = np.asarray(check_array("eigenvalues", self.eigenvalues, ndim=1), dtype=float)
        if (eig < 0).any():
            raise ValueError(f"eigenvalues must be non-negative, got min {float(eig.min()):g}")
        dim = eig.size
        centers = np.asarray(check_array("centers", self.centers, shape=(None, dim)), dtype=float)
        x_star = np.asarray(check_array("x_star", self.x_star, shape=(dim,)), dtype=float)
        x0 = np.asarray(check_array("x0", self.x0, shape=(dim,)), dtype=float)
        noise = check_range("noise", self.noise, 0.0)
        for name, value in (("eigenvalues", eig), ("centers", centers), ("x_star", x_star),
                            ("x0", x0), ("noise", noise)):
            object.__setattr__(self, name, value)
        # the centres as row views, so that a gradient does not index the array each time
        object.__setattr__(self, "_rows", list(self.centers))

    def grad(self, x: Any, rank: int | None = None) -> Any:
        """Worker ``rank``'s gradient, or the global one (``rank=None``), at ``x`` of shape
        ``(..., dim)``."""
        c = self.x_star if rank is None else self._rows[rank]
        return self.eigenvalues * (x - c)

    def with_noise(self, noise: float) -> Quadratic:
        """The same quadratic with gradient noise of standard deviation ``noise`` per coordinate."""
        return Quadratic(self.eigenvalues, self.centers, self.x_star, self.x0,
                         check_range("noise", noise, 0.0))


class SeedRows:
    r"""The quadratics of several seeds as the rows of one run (:func:`run_seeds`).

    Under a time model that draws nothing (:class:`~iclr_lab.distributed.ringleader.timing.FixedTimes`)
    the arrival schedule depends neither on the seed nor on the iterates, so runs at several seeds
    share it, and one pass of the event loop can serve them all. Block ``s`` of the model batch (its
    ``rows`` consecutive rows) starts at ``problems[s].x0``, has ``problems[s]``'s centres and optimum,
    and draws its gradient noise from the streams of ``seeds[s]``: each block gives exactly the
    numbers of a run of its own at that seed (every operation on a row is element-wise, or a sum
    along that row alone).

    Args:
        problems: one :class:`Quadratic` per seed, all with the same eigenvalues, workers, dimension
            and noise (only the centres, optimum and start may differ).
        seeds: the seed of each problem's run (integers in [0, 2**32 - 1]).
        rows: rows (step sizes) per seed, an integer >= 1.

    Raises:
        TypeError, ValueError: a problem that is not a :class:`Quadratic`, problems that differ in
            more than their centres, optimum and start, or ``seeds`` of another length.
    """

    def __init__(self, problems: Sequence[Quadratic], seeds: Sequence[int], rows: int = 1) -> None:
        problems = tuple(problems)
        if not problems:
            raise ValueError("problems must hold at least one Quadratic")
        for k, q in enumerate(problems):
            if type(q) is not Quadratic:
                raise TypeError(f"problems[{k}] must be a Quadratic, got {type(q).__name__}")
        first = problems[0]
        for k, q in enumerate(problems[1:], 1):
            if (q.centers.shape != first.centers.shape or q.noise != first.noise
                    or not np.array_equal(q.eigenvalues, first.eigenvalues)):
                raise ValueError(f"problems[{k}] differs from problems[0] in its eigenvalues, shape or "
                                 "noise: only the centres, optimum and start may differ")
        if len(seeds) != len(problems):
            raise ValueError(f"seeds must hold one seed per problem ({len(problems)}), got {len(seeds)}")
        self.problems = problems
        self.seeds = tuple(check_seed(s) for s in seeds)
        self.rows = check_int("rows", rows, 1)
        self.eigenvalues = first.eigenvalues
        self.noise = first.noise

        def stacked(arrays: Sequence[np.ndarray]) -> np.ndarray:
            return np.repeat(np.stack(arrays), self.rows, axis=0)

        self.x0 = stacked([q.x0 for q in problems])
        self.x_star = stacked([q.x_star for q in problems])
        # worker i's centres, one row per row of the batch (what Quadratic._rows is for one seed)
        self._rows = [stacked([q.centers[i] for q in problems]) for i in range(first.n_workers)]

    @property
    def dim(self) -> int:
        return int(self.eigenvalues.size)

    @property
    def n_workers(self) -> int:
        return len(self._rows)

    def grad(self, x: Any, rank: int | None = None) -> Any:
        """Worker ``rank``'s gradient, or the global one, at ``x`` of shape ``(rows, dim)``: each row
        at its own seed's problem."""
        c = self.x_star if rank is None else self._rows[rank]
        return self.eigenvalues * (x - c)


#: noise vectors drawn at a time from a worker's generator (the same stream as one draw per gradient)
_NOISE_BLOCK = 64


class Horizon(Exception):  # noqa: N818 - it is a signal, not an error
    """Raised inside a method's loop when the next arrival would come after the horizon."""


class Simulator:
    """The event loop that every method runs on.

    A method talks to the workers through :meth:`send` (start worker ``i`` at the current model),
    :meth:`restart` (start it again at the point it already holds), :meth:`discard` (drop its
    gradient in flight), :meth:`arrival` (wait for the next gradient) and :meth:`update` (one
    model update ``x <- x - step * direction``, ``ringleader-eq-update``). The simulator counts
    everything the chapter's invariants are about: gradients computed and discarded, idle time,
    delays, rounds, and the bytes sent each way.

    Args:
        problem: the objective (:class:`Problem`).
        times: the time model; its ``n`` must equal ``problem.n_workers``.
        steps: one step size per row of the model batch (each > 0).
        horizon: the simulated time at which the run stops (> 0).
        seed: seeds the time noise and the gradient noise, one stream per worker each.
        checkpoints: number of equally spaced times in ``[0, horizon]`` at which ``||grad f||^2``
            (``ringleader-eq-metric``) and the bytes sent so far are recorded.
        record_jobs: keep one record per gradient (worker, start, end, fate) for timeline charts.
        diverged: a row whose ``||grad f||^2`` exceeds this multiple of its start value is stopped
            (its step set to 0) and recorded as NaN from then on.
        noise: the gradient noise's standard deviation per coordinate, one value per row of the
            batch (``None``: ``problem.noise`` for every row). Every row still shares one noise
            vector per gradient, scaled by its own value.

    ``problem`` may be a :class:`SeedRows` (runs at several seeds in one pass, :func:`run_seeds`):
    ``steps`` then has ``rows`` values per seed, block after block, ``times`` must be a
    :class:`~iclr_lab.distributed.ringleader.timing.FixedTimes`, ``noise`` must be ``None``, and
    ``seed`` is not used (each block's noise comes from its own seed's streams).
    """

    def __init__(self, problem: Problem, times: TimeModel, steps: float | Sequence[float] | np.ndarray,
                 horizon: float, *, seed: int = 0, checkpoints: int = 200, record_jobs: bool = False,
                 diverged: float = 1e8, noise: Sequence[float] | np.ndarray | None = None) -> None:
        if not all(hasattr(problem, a) for a in ("dim", "n_workers", "noise", "x0", "grad")):
            raise TypeError(f"problem must be a Problem (dim, n_workers, noise, x0, grad), "
                            f"got {type(problem).__name__}")
        self.problem = problem
        self.n = check_int("problem.n_workers", problem.n_workers, 1)
        if not all(hasattr(times, a) for a in ("n", "finish", "rate")):
            raise TypeError(f"times must be a time model (n, finish, rate), got {type(times).__name__}")
        if times.n != self.n:
            raise ValueError(f"times must describe {self.n} workers (problem.n_workers), got {times.n}")
        self.times = times
        self._finish = times.finish  # bound once: _start calls it for every gradient
        # the authors' time model draws one normal per gradient from its worker's stream: drawn
        # here in blocks (a block of standard_normal is the same numbers as one draw at a time),
        # and finish() computed inline, with the same operations
        self._authors: tuple[tuple[float, ...], tuple[float, ...]] | None = (
            (times.tau, times.scale) if type(times) is AuthorsTimes else None)
        self._time_buf: list[list[float]] = [[] for _ in range(self.n)]
        self._time_pos = [0] * self.n
        steps_ = np.atleast_1d(np.asarray(steps, dtype=float))
        if steps_.ndim != 1 or not steps_.size:
            raise ValueError(f"steps must be a number or a 1-D sequence, got shape {steps_.shape}")
        for i, s in enumerate(steps_):
            check_range("steps" if np.ndim(steps) == 0 else f"steps[{i}]", float(s), 0.0, math.inf,
                        low_open=True)
        self.steps = steps_
        self._step_col = steps_[:, None].copy()
        self.horizon = check_range("horizon", horizon, 0.0, math.inf, low_open=True)
        seed = check_seed(seed)
        self.noise = check_range("problem.noise", problem.noise, 0.0)
        # one noise level per row, as a column (None: problem.noise for every row); a row's
        # noise is level * z, the same product, element by element, as with one level
        self._levels: np.ndarray | None = None
        if noise is not None:
            levels = np.asarray(noise, dtype=float)
            if levels.shape != steps_.shape:
                raise ValueError(f"noise must have one value per step size ({steps_.size}), got "
                                 f"shape {levels.shape}")
            for i, s in enumerate(levels):
                check_range(f"noise[{i}]", float(s), 0.0)
            self._levels = levels[:, None].copy()
        self._noisy = bool(self.noise) if self._levels is None else bool(self._levels.any())
        self.dim = check_int("problem.dim", problem.dim, 1)
        # a Quadratic's gradient is evaluated inline by arrival() (the same operations as grad())
        self._eig: np.ndarray | None = None
        self._centres: list[np.ndarray] = []
        if type(problem) is Quadratic or type(problem) is SeedRows:
            self._eig, self._centres = problem.eigenvalues, problem._rows
        self.x0 = np.asarray(problem.x0, dtype=float)
        # several seeds in one pass: (seeds, rows, dim), the shape a gradient's noise is added in
        self._blocks: tuple[int, int, int] | None = None
        seeds = [seed]
        if type(problem) is SeedRows:
            if type(times) is not FixedTimes:
                raise ValueError("a SeedRows problem needs FixedTimes: the seeds must share one "
                                 f"schedule, and {type(times).__name__} draws its times per seed")
            if noise is not None:
                raise ValueError("a SeedRows problem takes no per-row noise levels (noise=None)")
            if steps_.size != self.x0.shape[0]:
                raise ValueError(f"steps must hold {problem.rows} values per seed "
                                 f"({self.x0.shape[0]} in all), got {steps_.size}")
            seeds = list(problem.seeds)
            self._blocks = (len(seeds), problem.rows, self.dim)
            self.x = self.x0.copy()
        else:
            self.x = np.tile(self.x0, (steps_.size, 1))
        self._scaled = np.empty_like(self.x)  # update()'s scratch: step times direction
        self._level_noise = np.empty_like(self.x)  # arrival()'s scratch: levels times the noise
        # noise levels applied at each arrival rather than to whole blocks: for more than two rows
        # (a prescaled block of two rows is 51 kB per worker, and stays in the cache)
        self._scale_late = self._levels is not None and steps_.size > 2
        self._late_levels: np.ndarray = self._levels if self._levels is not None else np.ones((1, 1))
        self.k = 0
        self.now = 0.0
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        # per worker, its gradient in flight as (point, iteration of the point, start, version):
        # the point is the model rows it was sent (never mutated: updates make new arrays)
        self._jobs: list[tuple[np.ndarray, int, float, int] | None] = [None] * self.n
        self._version = [0] * self.n
        self._held = [-1] * self.n  # the iteration of the point each worker holds (-1: none yet)
        self._held_point: list[np.ndarray | None] = [None] * self.n
        self._free_since = [0.0] * self.n
        self._time_rng = [np.random.default_rng([seed, 1, i]) for i in range(self.n)]
        # one noise stream per worker and seed
        self._noise_rngs = [[np.random.default_rng([s, 2, i]) for s in seeds] for i in range(self.n)]
        self._noise_buf: list[np.ndarray] = [np.zeros((0, self.dim))] * self.n
        self._noise_pos = [_NOISE_BLOCK] * self.n  # empty buffers: the first arrival draws a block
        # counters
        self.computed = 0  # gradients delivered to the server
        self.discarded = 0  # gradients dropped before they were delivered
        self.uploads = 0
        self.downloads = 0
        self._idle = [0.0] * self.n  # seconds each worker spent waiting for work
        self._wasted = [0.0] * self.n  # seconds spent on gradients that were discarded
        self._delay_counts = np.zeros(1, dtype=np.int64)  # histogram of the delays folded so far
        self._delays: list[int] = []  # delays of single gradients not yet folded into it
        self._delay_arrays: list[np.ndarray] = []  # delays of whole tables not yet folded
        self.round_ends: list[tuple[float, int, float]] = []  # (time, k, smallest harmonic batch)
        self._round_harmonic = math.inf
        # records at the checkpoints
        check_int("checkpoints", checkpoints, 1)
        self.checkpoint_times = np.linspace(0.0, self.horizon, checkpoints + 1)
        self._times_list = self.checkpoint_times.tolist()
        self.grad_sq = np.full((steps_.size, checkpoints + 1), np.nan)
        self.sent_bytes = np.zeros(checkpoints + 1)
        self._c = 0
        self._next_checkpoint = 0.0  # checkpoint_times[_c], inf once every checkpoint is recorded
        # the divergence limit of every row (the rows of one seed share a start, hence a limit)
        start = check_range("diverged", diverged, 1.0) * self._grad_sq(self.x)
        self._limit: float | np.ndarray = start if self._blocks else start.max()
        self.stopped = np.zeros(steps_.size, dtype=bool)
        self.jobs: list[dict[str, Any]] | None = [] if record_jobs else None
        self.update_times: list[float] = []
        self._last: dict[str, Any] | None = None

    # --- what a method calls -------------------------------------------------------------------

    def send(self, i: int) -> None:
        """Send the current model to worker ``i`` and start it on a gradient there."""
        if self._held[i] != self.k:  # a worker that already holds this point is not sent it again
            self.downloads += 1
            self._held[i] = self.k
            self._held_point[i] = self.x
        self._start(i)

    def restart(self, i: int) -> None:
        """Start worker ``i`` on another gradient at the point it already holds (nothing is sent)."""
        if self._held_point[i] is None:
            raise RuntimeError(f"worker {i} holds no point yet: send() it one first")
        self._start(i)

    def discard(self, i: int) -> None:
        """Drop worker ``i``'s gradient in flight, if any (Malenia, Rennala, minibatch restarts)."""
        job = self._jobs[i]
        if job is None:
            return
        self._version[i] += 1  # its heap entry is now stale and is skipped when it comes up
        self._jobs[i] = None
        self._free_since[i] = self.now
        self.discarded += 1
        self._wasted[i] += self.now - job[2]
        if self.jobs is not None:
            self.jobs.append({"worker": i, "start": job[2], "end": self.now, "fate": "discarded",
                              "k": job[1]})

    def arrival(self) -> tuple[int, np.ndarray, int]:
        """Wait for the next gradient: ``(worker, gradient rows, iteration of its point)``.

        The gradient is evaluated now, lazily, at the point the worker was sent. Raises
        :class:`Horizon` when the next gradient would arrive after the horizon.
        """
        heap, versions = self._heap, self._version
        while True:
            if not heap:
                raise RuntimeError("no worker is computing: the method would wait forever")
            entry = heapq.heappop(heap)
            t, _, i, version = entry
            if version == versions[i]:
                break
        if t > self.horizon:
            heapq.heappush(heap, entry)  # it stays in flight: the run ends before it arrives
            self._record_until(self.horizon, inclusive=True)
            raise Horizon
        if self._next_checkpoint < t:  # what _record_until(t) checks first, without the call
            self._record_until(t)
        self.now = t
        job = self._jobs[i]
        assert job is not None
        self._jobs[i] = None
        self._free_since[i] = t
        point, k = job[0], job[1]
        if self._eig is not None:  # a Quadratic: its gradient inline, without a call per arrival
            g = point - self._centres[i]
            g *= self._eig
        else:
            g = self.problem.grad(point, i)
        if self._noisy:
            # the next vector of worker i's stream
            pos = self._noise_pos[i]
            buf = self._noise_buf[i]
            if pos == _NOISE_BLOCK:
                buf = self._noise_buf[i] = self._noise_block(i)
                pos = 0
            self._noise_pos[i] = pos + 1
            if self._blocks is not None and self._blocks[1] > 1:  # each seed's vector to its rows
                blocks = g.reshape(self._blocks)
                blocks += buf[pos][:, None, :]
            elif not self._scale_late:
                g += buf[pos]  # in place: g is this arrival's own array
            else:  # each row's level times the vector, element by element
                g += np.multiply(self._late_levels, buf[pos], out=self._level_noise)
        self.computed += 1
        self.uploads += 1
        if self.jobs is not None:
            self._last = {"worker": i, "start": job[2], "end": t, "fate": "used", "k": k}
            self.jobs.append(self._last)
        return i, g, k

    def fate(self, label: str) -> None:
        """Label the gradient just received (timeline charts only): ``phase 1``, ``update``,
        ``buffered``, ``used``..."""
        if self._last is not None:
            self._last["fate"] = label

    def update(self, direction: np.ndarray, oldest: np.ndarray | int | None = None,
               counts: np.ndarray | None = None) -> None:
        """One model update ``x <- x - step * direction`` for every row of the batch.

        Args:
            direction: the estimator, shape ``(rows, dim)`` (or ``(dim,)``).
            oldest: the iteration of the oldest point behind each gradient used; the delays
                ``k - oldest`` (``ringleader-eq-delay``) go into ``delay_counts``.
            counts: gradients per worker in the estimator; their harmonic mean ``B`` is tracked
                per round (``ringleader-eq-step``).
        """
        step = np.multiply(self._step_col, direction, out=self._scaled)
        self.x = self.x - step  # a new array: dispatched points stay intact
        # the delays are kept and binned when delay_counts is read (the same histogram)
        if isinstance(oldest, np.ndarray):
            self._delay_arrays.append(self.k - oldest)  # a new array: the table's stays its own
            if len(self._delay_arrays) == 4096:  # folded now and then: IA²SGD makes ~10^5 of them
                _ = self.delay_counts
        elif oldest is not None:
            self._delays.append(self.k - int(oldest))
        if counts is not None:
            self._round_harmonic = min(self._round_harmonic, len(counts) / float((1.0 / counts).sum()))
        self.k += 1
        self.update_times.append(self.now)

    def end_round(self) -> None:
        """Mark the end of a round (Ringleader, Malenia, minibatch SGD, Rennala)."""
        self.round_ends.append((self.now, self.k, self._round_harmonic))
        self._round_harmonic = math.inf

    # --- results -------------------------------------------------------------------------------

    def finish(self) -> None:
        """Close the books at the horizon: idle time of waiting workers, last checkpoints."""
        self._record_until(self.horizon, inclusive=True)
        for i in range(self.n):
            if self._jobs[i] is None:
                self._idle[i] += self.horizon - self._free_since[i]
        self.now = self.horizon

    @property
    def idle(self) -> np.ndarray:
        """Seconds each worker spent waiting for work."""
        return np.array(self._idle)

    @property
    def wasted(self) -> np.ndarray:
        """Seconds each worker spent on gradients that were discarded."""
        return np.array(self._wasted)

    @property
    def delay_counts(self) -> np.ndarray:
        """Histogram of the delays ``k - oldest`` of the gradients used in updates
        (``ringleader-eq-delay``): entry ``d`` counts the gradients used ``d`` updates late."""
        pending = [np.asarray(self._delays, dtype=np.int64), *self._delay_arrays]
        d = np.concatenate(pending)
        if d.size:
            counts = np.bincount(d, minlength=self._delay_counts.size)
            counts[:self._delay_counts.size] += self._delay_counts
            self._delay_counts = counts  # a new array: one returned before stays as it was
            self._delays, self._delay_arrays = [], []
        return self._delay_counts

    def rows(self, start: int, stop: int) -> Simulator:
        """The run of rows ``start:stop`` alone: the same schedule and counters, with the model,
        step sizes, noise levels and ``||grad f||^2`` records of those rows only (a finished run
        of several noise levels, split into one run per level)."""
        out = copy.copy(self)
        # the counters are shared by every row: each part gets its own copy
        out._delay_counts, out._delays, out._delay_arrays = self.delay_counts.copy(), [], []
        out._idle, out._wasted = list(self._idle), list(self._wasted)
        sl = slice(start, stop)
        out.steps, out.x, out.grad_sq = self.steps[sl], self.x[sl], self.grad_sq[sl]
        out._scaled, out._level_noise = self._scaled[sl], self._level_noise[sl]
        out.stopped, out._step_col = self.stopped[sl], self._step_col[sl]
        if self._levels is not None:
            out._levels = out._late_levels = self._levels[sl]
        if isinstance(self._limit, np.ndarray):
            out._limit = self._limit[sl]
        return out

    @property
    def max_delay(self) -> int:
        """The largest delay of any gradient used in an update (``ringleader-eq-delay``)."""
        nz = np.flatnonzero(self.delay_counts)
        return int(nz[-1]) if nz.size else 0

    @property
    def bytes_per_float(self) -> int:
        return int(self.x.dtype.itemsize)

    # --- internals -----------------------------------------------------------------------------

    def _start(self, i: int) -> None:
        if self._jobs[i] is not None:
            raise RuntimeError(f"worker {i} is still computing: discard() its gradient first")
        point = self._held_point[i]
        assert point is not None
        self._idle[i] += self.now - self._free_since[i]
        if self._authors is not None:  # AuthorsTimes.finish, inline, from worker i's block
            pos = self._time_pos[i]
            if pos == len(self._time_buf[i]):
                self._time_buf[i] = self._time_rng[i].standard_normal(_NOISE_BLOCK).tolist()
                pos = 0
            self._time_pos[i] = pos + 1
            tau, scale = self._authors
            finish = self.now + tau[i] + abs(scale[i] * self._time_buf[i][pos])
        else:
            finish = self._finish(i, self.now, self._time_rng[i])
        self._jobs[i] = (point, self._held[i], self.now, self._version[i])
        heapq.heappush(self._heap, (finish, self._seq, i, self._version[i]))
        self._seq += 1

    def _noise_block(self, i: int) -> np.ndarray:
        """The next noise vectors of worker ``i``, row ``b`` the ``b``-th next ``z`` of its stream
        (times the noise level when there is one level). ``standard_normal((B, dim))`` is ``B``
        draws of ``standard_normal(dim)`` in a row, so every gradient gets the vector (and the
        product) that a draw of its own would give it."""
        rngs = self._noise_rngs[i]
        if self._blocks is not None:  # (block, seed, dim): each seed's own stream
            return self.noise * np.stack([r.standard_normal((_NOISE_BLOCK, self.dim)) for r in rngs],
                                         axis=1)
        z = rngs[0].standard_normal((_NOISE_BLOCK, self.dim))
        if self._levels is None:
            return self.noise * z
        if not self._scale_late:
            # one level per row: entry b is (rows, dim), each row z_b times its level (the same
            # products as scaling each vector when it is used, without a product per arrival)
            return self._levels[None, :, :] * z[:, None, :]
        # many rows: arrival() scales each vector by the rows' levels when it is used (a block
        # scaled in advance is rows times larger, ~1 MB per worker with 40 rows, and falls out of
        # the cache before it is read: slower, for the same products)
        return z

    def _grad_sq(self, x: np.ndarray) -> np.ndarray:
        g = self.problem.grad(x)
        return np.asarray((g * g).sum(axis=-1), dtype=float)

    def _record_until(self, t: float, inclusive: bool = False) -> None:
        times = self._times_list
        while self._c < len(times) and (times[self._c] < t or (inclusive and times[self._c] <= t)):
            with np.errstate(over="ignore", invalid="ignore"):
                value = self._grad_sq(self.x)
            bad = ~(value <= self._limit)  # NaN or too large: this row diverged
            if bad.any():
                self.stopped |= bad
                self._step_col[bad] = 0.0
            value[self.stopped] = np.nan
            self.grad_sq[:, self._c] = value
            self.sent_bytes[self._c] = (self.uploads + self.downloads) * self.dim * self.bytes_per_float
            self._c += 1
        self._next_checkpoint = times[self._c] if self._c < len(times) else math.inf


# ------------------------------------------------------------------------------------------------
# The gradient table of Ringleader (and, with replace(), of IA²SGD)
# ------------------------------------------------------------------------------------------------


class GradientTable:
    """For each worker, the running mean ``G_i / b_i`` of its gradients and their count ``b_i``;
    ``average`` is ``(1/n) sum_i G_i / b_i``, the estimator of ``ringleader-eq-estimator``.

    The mean over workers is kept up to date incrementally, so adding a gradient costs two vector
    operations whatever ``n``. ``oldest`` holds, per worker, the iteration of the oldest point
    behind its entry (for the delay of ``ringleader-eq-delay``).
    """

    def __init__(self, n: int, shape: tuple[int, ...]) -> None:
        """``n`` workers (an integer >= 1), each entry of shape ``shape`` (integers >= 0)."""
        n = check_int("n", n, 1)
        if isinstance(shape, int) or not isinstance(shape, tuple):
            raise TypeError(f"shape must be a tuple of integers, got {type(shape).__name__}")
        shape = tuple(check_int(f"shape[{i}]", k, 0) for i, k in enumerate(shape))
        self.n = n
        self.mean = np.zeros((n, *shape))
        self.count = np.zeros(n, dtype=np.int64)
        self.oldest = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        self.average = np.zeros(shape)
        self.filled = 0  # workers with at least one gradient
        # count as Python ints too (add() reads one per gradient): change counts only through
        # add(), replace() and clear()
        self._counts = [0] * n
        self._delta = np.zeros(shape)  # add()'s scratch vector

    def add(self, i: int, g: np.ndarray, k: int) -> None:
        """Fold gradient ``g`` (computed at iteration ``k``'s point) into worker ``i``'s mean."""
        c = self._counts[i] + 1
        self._counts[i] = c
        self.count[i] = c
        mean = self.mean[i]  # a view: updated in place
        delta = np.subtract(g, mean, out=self._delta)
        delta /= c
        mean += delta
        delta /= self.n
        self.average += delta
        if c == 1:  # the first gradient of its entry: the oldest point behind it
            self.filled += 1
            self.oldest[i] = k
        elif k < self.oldest[i]:
            self.oldest[i] = k

    def replace(self, i: int, g: np.ndarray, k: int) -> None:
        """Make ``g`` worker ``i``'s only gradient (IA²SGD keeps each worker's latest)."""
        delta = np.subtract(g, self.mean[i], out=self._delta)
        delta /= self.n
        self.average += delta
        self.mean[i] = g
        if self._counts[i] == 0:
            self.filled += 1
        self._counts[i] = 1
        self.count[i] = 1
        self.oldest[i] = k

    def full(self) -> bool:
        """Whether every worker has at least one gradient in the table."""
        return self.filled == self.n

    def clear(self) -> None:
        self.mean[:] = 0.0
        self.count[:] = 0
        self._counts = [0] * self.n
        self.oldest[:] = np.iinfo(np.int64).max
        self.average[:] = 0.0
        self.filled = 0


# ------------------------------------------------------------------------------------------------
# The methods: each a loop over arrivals; the simulator stops it at the horizon
# ------------------------------------------------------------------------------------------------


def _check_sim(sim: Any) -> None:
    if not isinstance(sim, Simulator):
        raise TypeError(f"sim must be a Simulator, got {type(sim).__name__}")


def ringleader(sim: Simulator, restart: str = "current") -> None:
    """Ringleader ASGD (``ringleader-eq-estimator``, ``ringleader-eq-update``).

    Rounds of two phases. **Phase 1** collects gradients, without updating, until every worker has
    one in the table; the worker that completes the table is the *last finisher*. **Phase 2** makes
    exactly ``n`` updates: one at once (the last finisher is sent the new point), then one for the
    first arrival of each other worker, which is folded into its entry before the update and then
    sent the new point. A worker that has already had its update this round keeps computing; its
    gradients go into the *next* table, which becomes the table of the next round.

    ``restart`` says where a worker that is not due a new point computes next: ``"current"``
    (the server's current point, as in the authors' code) or ``"last_sent"`` (the point it last
    received, as in the paper's estimator, where each entry holds gradients at one point).
    """
    _check_sim(sim)
    check_choice("restart", restart, ("current", "last_sent"))
    keep_going = sim.send if restart == "current" else sim.restart
    n = sim.n
    table, buffer = GradientTable(n, sim.x.shape), GradientTable(n, sim.x.shape)
    for i in range(n):
        sim.send(i)
    while True:
        # Phase 1: fill the table; no update, everyone keeps computing
        while True:
            i, g, k = sim.arrival()
            sim.fate("phase 1")
            table.add(i, g, k)
            if table.full():
                break
            keep_going(i)
        # Phase 2: exactly n updates, the first one with the last finisher's gradient
        sim.update(table.average, table.oldest, table.count)
        sim.send(i)
        pending = set(range(n)) - {i}
        while pending:
            i, g, k = sim.arrival()
            if i in pending:  # its first arrival this round: fold it in, update, send the new point
                sim.fate("update")
                table.add(i, g, k)
                # no counts: they only grow within a round, so the round's smallest harmonic
                # mean is the first update's (exactly: 1/c and sums round monotonically)
                sim.update(table.average, table.oldest)
                sim.send(i)
                pending.discard(i)
            else:  # it already had its update: nothing is discarded, the gradient waits
                sim.fate("buffered")
                buffer.add(i, g, k)
                keep_going(i)
        table, buffer = buffer, table
        buffer.clear()
        sim.end_round()


def malenia(sim: Simulator, min_harmonic: float | None = None) -> None:
    """Malenia SGD: synchronous rounds of collection at one point, then one update.

    The server broadcasts ``x``; every worker computes gradients there until each has at least one
    (the authors' stopping rule), or, with ``min_harmonic = S/n``, until also the harmonic mean of
    the counts is at least ``S/n`` (the original rule, ``S = max(ceil(sigma^2/eps), n)``). Then one
    update with ``(1/n) sum_i G_i / b_i``; the gradients still in flight are discarded.
    ``min_harmonic``: ``None`` or a number in [0, inf).
    """
    _check_sim(sim)
    if min_harmonic is not None:
        min_harmonic = check_range("min_harmonic", min_harmonic, 0.0)
    n = sim.n
    while True:
        table = GradientTable(n, sim.x.shape)
        for i in range(n):
            sim.send(i)
        while not table.full() or (min_harmonic is not None
                                   and n / float(np.sum(1.0 / table.count)) < min_harmonic):
            i, g, k = sim.arrival()
            table.add(i, g, k)
            sim.restart(i)
        for i in range(n):
            sim.discard(i)
        sim.update(table.average, table.oldest, table.count)
        sim.end_round()


def rennala(sim: Simulator, batch: int | None = None) -> None:
    """Rennala SGD: collect ``batch`` gradients (default ``n``) at the current point from whoever
    finishes first, then one update with their plain average; work in flight is discarded.

    Every gradient counts the same, so fast workers weigh more: it is meant for workers that share
    one data distribution. ``batch``: ``None`` or an integer >= 1.
    """
    _check_sim(sim)
    batch = sim.n if batch is None else check_int("batch", batch, 1)
    while True:
        total = np.zeros_like(sim.x)
        for i in range(sim.n):
            sim.send(i)
        for _ in range(batch):
            i, g, _ = sim.arrival()
            total += g
            sim.restart(i)
        for i in range(sim.n):
            sim.discard(i)
        sim.update(total / batch, sim.k)
        sim.end_round()


def ia2sgd(sim: Simulator) -> None:
    """IA²SGD: a table of each worker's *latest* gradient; after it is first filled, every arrival
    replaces its worker's entry and triggers one update with the table's average, and the worker
    is sent the new point. No worker waits, nothing is discarded, but nothing bounds the delays."""
    _check_sim(sim)
    n = sim.n
    table = GradientTable(n, sim.x.shape)
    for i in range(n):
        sim.send(i)
    while not table.full():  # warm-up: fill the table once, without updating (as the authors do)
        i, g, k = sim.arrival()
        table.replace(i, g, k)
        sim.send(i)
    while True:
        i, g, k = sim.arrival()
        table.replace(i, g, k)
        # no counts: they only feed the harmonic mean of a round, and IA²SGD has no rounds
        sim.update(table.average, table.oldest)
        sim.send(i)


def naive_asgd(sim: Simulator) -> None:
    """Asynchronous SGD: every arrival is one update with that gradient alone, and its worker is
    sent the new point. Fast workers update most often, so with different data the iterates are
    pulled towards the fast workers' optimum (``ringleader-eq-naive-fixed``)."""
    _check_sim(sim)
    for i in range(sim.n):
        sim.send(i)
    while True:
        i, g, k = sim.arrival()
        sim.update(g, k)
        sim.send(i)


def minibatch_sgd(sim: Simulator) -> None:
    """Synchronous minibatch SGD: one gradient from every worker at the current point, then one
    update with their average; a worker that has delivered waits (idle) for the slowest."""
    _check_sim(sim)
    n = sim.n
    while True:
        total = np.zeros_like(sim.x)
        for i in range(n):
            sim.send(i)
        for _ in range(n):
            _, g, _ = sim.arrival()
            total += g
        sim.update(total / n, sim.k)
        sim.end_round()


#: The methods by name, in the order the chapter lists them.
METHODS: dict[str, Callable[..., None]] = {
    "Ringleader": ringleader,
    "Malenia": malenia,
    "IA²SGD": ia2sgd,
    "naive ASGD": naive_asgd,
    "minibatch SGD": minibatch_sgd,
    "Rennala": rennala,
}


def run_method(method: str | Callable[..., None], problem: Problem, times: TimeModel,
               horizon: float, steps: float | Sequence[float] | np.ndarray, *, seed: int = 0,
               checkpoints: int = 200, record_jobs: bool = False,
               noise: Sequence[float] | np.ndarray | None = None, **options: Any) -> Simulator:
    """Run ``method`` (a name of ``METHODS`` or a loop over a :class:`Simulator`) until
    ``horizon`` and return the simulator with everything it recorded.

    ``noise`` gives each row of ``steps`` its own noise level (see :class:`Simulator`).
    ``options`` go to the method (``restart=`` for Ringleader, ``min_harmonic=`` for Malenia,
    ``batch=`` for Rennala).
    """
    if isinstance(method, str):
        check_choice("method", method, METHODS)
        fn = METHODS[method]
    else:
        fn = method
    sim = Simulator(problem, times, steps, horizon, seed=seed, checkpoints=checkpoints,
                    record_jobs=record_jobs, noise=noise)
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            fn(sim, **options)
        except Horizon:
            pass
    sim.finish()
    return sim


def run_seeds(method: str | Callable[..., None], problems: Sequence[Quadratic], times: FixedTimes,
              horizon: float, steps: float | Sequence[float], seeds: Sequence[int], *,
              checkpoints: int = 200, **options: Any) -> list[Simulator]:
    """:func:`run_method` at several seeds in one pass of the event loop: one run per seed, each
    exactly what ``run_method(method, problems[s], times, horizon, steps, seed=seeds[s])`` returns
    (:class:`SeedRows`). ``times`` must draw nothing
    (:class:`~iclr_lab.distributed.ringleader.timing.FixedTimes`), so that every seed has the same
    schedule; ``steps`` are the step sizes of every seed's run."""
    steps_ = [float(s) for s in np.atleast_1d(np.asarray(steps, dtype=float))]
    stack = SeedRows(problems, seeds, rows=len(steps_))
    sim = run_method(method, stack, times, horizon, steps_ * len(stack.seeds), checkpoints=checkpoints,
                     **options)
    out = []
    for k, problem in enumerate(stack.problems):
        part = sim.rows(k * stack.rows, (k + 1) * stack.rows)
        part.problem, part.x0 = problem, problem.x0
        out.append(part)
    return out


def simulate(method: str, problem: Problem, time_model: TimeModel, budget: float, seed: int = 0, *,
             step: float | Sequence[float] = 0.05, checkpoints: int = 200, **options: Any) -> pd.DataFrame:
    """Run ``method`` on ``problem`` for ``budget`` simulated seconds: a DataFrame of simulated time
    against ``||grad f(x)||^2`` (``ringleader-eq-metric``).

    Columns: ``time``, ``step``, ``grad_sq`` (NaN once a step size diverged) and ``bytes`` (sent
    both ways so far, counted message by message). One row per checkpoint and step size.

    >>> from iclr_lab.core.worker_data import QuadraticToy
    >>> from iclr_lab.distributed.ringleader import fixed_times, simulate
    >>> df = simulate("Ringleader", QuadraticToy(5, 4, noise=0.1), fixed_times(4), 200.0, step=0.1)
    >>> bool(df["grad_sq"].iloc[-1] < df["grad_sq"].iloc[0])
    True

    ``budget`` is in (0, inf), ``seed`` an integer in [0, 2**32 - 1], ``step`` a step size in
    (0, inf) or a sequence of them, ``checkpoints`` an integer >= 1 (see :class:`Simulator`).
    """
    import pandas as pd

    budget = check_range("budget", budget, 0.0, math.inf, low_open=True)

    sim = run_method(method, problem, time_model, budget, step, seed=seed, checkpoints=checkpoints,
                     **options)
    frames = [pd.DataFrame({"time": sim.checkpoint_times, "step": s, "grad_sq": sim.grad_sq[r],
                            "bytes": sim.sent_bytes}) for r, s in enumerate(sim.steps)]
    return pd.concat(frames, ignore_index=True)


def theory_step(n: int, L: float, eps: float, B: float, sigma: float) -> float:
    """The step size of the paper's theorem, ``min(1/(8 n L), eps B / (10 L sigma^2))``
    (``ringleader-eq-step``). ``n`` is an integer >= 1, ``L`` and ``eps`` are in (0, inf), ``B``
    in [1, inf) and ``sigma`` in [0, inf)."""
    n = check_int("n", n, 1)
    L = check_range("L", L, 0.0, math.inf, low_open=True)
    eps = check_range("eps", eps, 0.0, math.inf, low_open=True)
    B = check_range("B", B, 1.0, math.inf)
    sigma = check_range("sigma", sigma, 0.0)
    cap = 1.0 / (8.0 * n * L)
    return cap if sigma == 0 else min(cap, eps * B / (10.0 * L * sigma**2))
