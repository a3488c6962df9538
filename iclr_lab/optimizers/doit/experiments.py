"""The DOIT chapter's experiments: ``reproduce()``, its claims, charts and explorer.

An MLP 64-64-64-10 learns scikit-learn's 8x8 digits from scratch (so ``omega_t = 0``). Five
candidate optimizers are each tuned by :func:`iclr_lab.core.tuning.tune` on one common learning-rate
grid (median final validation cross-entropy over tuning seeds disjoint from the judging seeds); DOIT
switches between exactly those tuned candidates. Baselines: every single optimizer at its tuned
rate, uniformly random switching, round-robin switching and a SWATS-like Adam-then-SGDM switch, all
with the same batches as DOIT at the same seed. The claims, the numbers the prose quotes and the
charts live in :mod:`~iclr_lab.optimizers.doit.claims` and :mod:`~iclr_lab.optimizers.doit.figures`.

In every cycle after the cold start, the main DOIT run is *branched*: every candidate runs the same
``tau`` steps, on the same minibatches, from the same state (with the state DOIT would give it), on a
copy of the model. That gives the true per-cycle best candidate and every candidate's realised score,
against which DOIT's choice and its surrogates' ranking are judged.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from iclr_lab.core.nn import batch_indices
from iclr_lab.core.report import Report, timed
from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.validation import check_choice, check_int, check_range, check_seed
from iclr_lab.optimizers.doit.method import (
    ACQUISITIONS,
    DOIT,
    OPTIMIZERS,
    cross_entropy_closure,
    make_optimizer,
    probe_fn,
    score,
)

if TYPE_CHECKING:
    import altair as alt

    from iclr_lab.core.tuning import Tuned

__all__ = ["BASELINES", "METHODS", "SIZES", "DigitsSplit", "Run", "digits_split", "explorer",
           "explorer_chart", "reproduce", "restart_shock", "run_method", "tune_rates"]

DOIT_NAME = "DOIT"
LITERAL = "DOIT (literal formula)"
RANDOM = "random switching"
ROUND_ROBIN = "round-robin"
SWATS = "SWATS-like (Adam → SGDM)"
#: the switching baselines, in the order the tables list them
BASELINES: tuple[str, ...] = (RANDOM, ROUND_ROBIN, SWATS)
#: every method of the comparison (DOIT's two acquisitions, the switching baselines, the singles)
METHODS: tuple[str, ...] = (DOIT_NAME, LITERAL, *BASELINES, *OPTIMIZERS)
SWATS_FRACTION = 0.4  # the SWATS-like rule runs Adam for the first 40 % of the steps, then SGDM
MLP_SIZES = (64, 64, 64, 10)
#: thresholds, all fixed before any run of this experiment (in percentage points / rates)
BEATS_PP = 1.0  # the paper's "1 % to 3 % higher accuracy", read at its lower end
WITHIN_PP = 1.0
AGREEMENT = 0.4
SPEARMAN = 0.3
#: the target of ``steps_to_target``: this factor times the best final validation loss of the single
#: optimizers at the same seed (the spec's 1.1, fixed before any run)
TARGET_FACTOR = 1.1
#: tuning seeds per (optimizer, rate) (iclr_lab.core.tuning.tuning_seeds: disjoint from the judging
#: seeds and from every stability block)
TUNING_SEEDS = 2


# ---------------------------------------------------------------------------------------------
# data and one training run
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DigitsSplit:
    """Digits as torch tensors: 80/20 stratified train/test, then 10 % of train held out (stratified)
    as the validation set that tunes the learning rates."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def digits_split() -> DigitsSplit:
    """The fixed split of the chapter (the same for every seed; seeds change the initialisation,
    the minibatches, the probe batch and DOIT's sampling)."""
    from sklearn.model_selection import train_test_split

    from iclr_lab.core.datasets import digits

    d = digits(seed=0)
    xtr, xva, ytr, yva = train_test_split(d.x_train, d.y_train, test_size=0.1, stratify=d.y_train,
                                          random_state=0)
    t = torch.from_numpy
    return DigitsSplit(t(xtr), t(ytr), t(xva), t(yva), t(d.x_test), t(d.y_test))


def _mlp(seed: int) -> torch.nn.Module:
    from iclr_lab.core.nn import mlp

    torch.manual_seed(seed)
    return mlp(list(MLP_SIZES))


def _probe_pick(data: DigitsSplit, seed: int, size: int) -> np.ndarray:
    """The training examples of the probe batch at ``seed``."""
    return np.random.default_rng([seed, 1]).choice(len(data.y_train), size, replace=False)


def _probe(data: DigitsSplit, seed: int, size: int) -> Callable[[torch.nn.Module], float]:
    idx = torch.from_numpy(_probe_pick(data, seed, size))
    return probe_fn(data.x_train[idx], data.y_train[idx])


class _Rule(DOIT):
    """A switching baseline: the DOIT loop (cycles, state reset on a switch) with a fixed rule in
    place of the surrogates."""

    def __init__(self, model: torch.nn.Module, rule: Callable[[int, np.random.Generator], int],
                 **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self._rule = rule

    def _decide(self, i: int, x: np.ndarray) -> tuple[int, str, np.ndarray, np.ndarray, np.ndarray, float]:
        nan = np.full(len(self.names), math.nan)
        return self._rule(i, self.rng), "rule", nan, nan.copy(), nan.copy(), math.nan

    def features(self) -> np.ndarray:
        return np.zeros(1)  # the rules do not look at the state


def _controller(method: str, model: torch.nn.Module, rates: dict[str, float], *, seed: int, cycle: int,
                n_ini: int, halving: int, steps: int, probe: Callable[[torch.nn.Module], float] | None,
                omega_t: float = 0.0) -> DOIT:
    common: dict[str, Any] = {"candidates": rates, "cycle": cycle, "n_ini": n_ini,
                              "halving": halving, "seed": seed, "probe": probe, "omega_t": omega_t}
    if method in (DOIT_NAME, LITERAL):
        return DOIT(model, acquisition="literal" if method == LITERAL else "intended", **common)
    k = len(rates)
    names = list(rates)
    if method == RANDOM:
        return _Rule(model, lambda i, rng: int(rng.integers(k)), **common)
    if method == ROUND_ROBIN:
        return _Rule(model, lambda i, rng: i % k, **common)
    if method == SWATS:
        switch = SWATS_FRACTION * steps
        return _Rule(model, lambda i, rng: names.index("Adam" if i * cycle < switch else "SGDM"),
                     **common)
    # a single optimizer: one candidate, kept for the whole run (exactly that optimizer)
    return _Rule(model, lambda i, rng: 0, **{**common, "candidates": {method: rates[method]}})


def _evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    with torch.no_grad():
        logits = model(x)
        return (float(nn.functional.cross_entropy(logits, y)),
                float((logits.argmax(1) == y).float().mean()))


def _branch(ctl: DOIT, batches: Sequence[torch.Tensor], data: DigitsSplit) -> np.ndarray:
    """Every candidate's score for the coming cycle, each run on a copy of the model from the same
    state with the state DOIT would give it (kept if it ran the previous cycle, else fresh)."""
    assert ctl.probe is not None
    l0 = ctl.probe(ctl.model)
    out = []
    for name in ctl.names:
        twin = copy.deepcopy(ctl.model)
        opt = make_optimizer(name, twin.parameters(), ctl.rates[name])
        if name == ctl.current and ctl.keep_state_if_same and ctl.optimizer is not None:
            opt.load_state_dict(copy.deepcopy(ctl.optimizer.state_dict()))
        losses = []
        for idx in batches:
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(twin(data.x_train[idx]), data.y_train[idx]).backward()
            opt.step()
            losses.append(ctl.probe(twin))
        out.append(score(l0, losses, ctl.alpha))
    return np.asarray(out)


@dataclass
class Run:
    """One training run: its evaluation log, its cycles (switching methods) and, for a branched
    DOIT run, every candidate's realised score in every cycle after the cold start."""

    log: pd.DataFrame
    cycles: pd.DataFrame
    branches: pd.DataFrame
    controller: DOIT


def run_method(method: str, seed: int, rates: dict[str, float], *, steps: int, cycle: int = 10,
               n_ini: int = 10, halving: int = 10, eval_every: int = 25, probe_size: int = 256,
               omega_t: float = 0.0, branch: bool = False, data: DigitsSplit | None = None) -> Run:
    """Train the chapter's MLP on digits with ``method`` at ``seed``; ``method`` is one of
    :data:`~iclr_lab.optimizers.doit.experiments.METHODS`.

    Every method sees the same initial weights and minibatches at the same seed. ``rates`` are the
    candidates' learning rates. With ``branch=True`` (DOIT only), every cycle after the cold start
    is first branched into all candidates (see the module docstring). ``omega_t`` is DOIT's
    transferability weight (0 here: the network trains from scratch).

    ``seed`` is in ``[0, 2**32 - 1]``; ``steps``, ``cycle``, ``halving`` and ``eval_every`` are at
    least 1, ``n_ini`` at least 0, ``probe_size`` in ``[1, n_train]``; ``omega_t`` is in ``[0, 1]``.
    """
    check_choice("method", method, METHODS)
    check_seed(seed)
    check_int("steps", steps, 1)
    check_int("cycle", cycle, 1)
    check_int("n_ini", n_ini, 0)
    check_int("halving", halving, 1)
    check_int("eval_every", eval_every, 1)
    check_int("probe_size", probe_size, 1)
    check_range("omega_t", omega_t, 0.0, 1.0)
    data = digits_split() if data is None else data
    check_int("probe_size", probe_size, 1, len(data.y_train))
    model = _mlp(seed)
    uses_score = method in (DOIT_NAME, LITERAL)
    probe = _probe(data, seed, probe_size) if uses_score else None
    ctl = _controller(method, model, rates, seed=seed, cycle=cycle, n_ini=n_ini, halving=halving,
                      steps=steps, probe=probe, omega_t=omega_t)
    batches = batch_indices(len(data.y_train), steps, 64, seed)
    rows, branch_rows = [], []
    for step, idx in enumerate(batches, start=1):
        i = len(ctl.history)
        if (branch and uses_score and (step - 1) % cycle == 0 and not ctl.in_cold_start(i)
                and step - 1 + cycle <= steps):
            scores = _branch(ctl, batches[step - 1:step - 1 + cycle], data)
            branch_rows += [{"cycle": i, "candidate": n, "branch_score": float(s)}
                            for n, s in zip(ctl.names, scores, strict=True)]
        loss = ctl.step(cross_entropy_closure(model, data.x_train[idx], data.y_train[idx]))
        finite = math.isfinite(loss)
        if step % eval_every == 0 or step == steps or not finite:
            val_loss, val_acc = _evaluate(model, data.x_val, data.y_val)
            test_loss, test_acc = _evaluate(model, data.x_test, data.y_test)
            rows.append({"step": step, "train_loss": loss, "val_loss": val_loss, "val_acc": val_acc,
                         "test_loss": test_loss, "test_acc": test_acc})
        if not finite:
            break
    log = pd.DataFrame(rows).assign(method=method, seed=seed)
    cycles = ctl.history_frame().assign(method=method, seed=seed) if uses_score or method in BASELINES \
        else pd.DataFrame()
    return Run(log, cycles, pd.DataFrame(branch_rows).assign(seed=seed), ctl)


def tune_rates(grid: Sequence[float], seed: int, *, steps: int, eval_every: int = 25,
               data: DigitsSplit | None = None) -> tuple[dict[str, float], pd.DataFrame, list[Tuned]]:
    """Tune every candidate's learning rate with :func:`iclr_lab.core.tuning.tune`: the same grid
    for every optimizer, the same objective (the median over ``TUNING_SEEDS`` tuning seeds of the
    final validation cross-entropy; a diverged run scores ``inf``), on the tuning seeds of ``seed``
    (:func:`iclr_lab.core.tuning.tuning_seeds`, disjoint from every judging seed). Returns the rates,
    one row per (optimizer, rate) with the median validation loss and accuracy, and the
    :class:`~iclr_lab.core.tuning.Tuned` records (a flag at a grid edge or next to a diverged point
    extends that optimizer's grid once).

    Every run of a round trains at once, stacked (``doit/_batched.py``), each as :func:`run_method`
    trains it alone: the whole grid first, then every extension that ``tune`` asks for.

    ``grid`` holds positive learning rates, ``seed`` is in ``[0, 2**32 - 1]``, ``steps`` and
    ``eval_every`` are at least 1.
    """
    from iclr_lab.core.tuning import tune, tuning_seeds

    _check_grid(grid)
    check_seed(seed)
    check_int("steps", steps, 1)
    check_int("eval_every", eval_every, 1)
    from iclr_lab.optimizers.doit._batched import Job, run_many

    data = digits_split() if data is None else data
    seeds = tuning_seeds(seed, TUNING_SEEDS)
    done: dict[tuple[str, float, int], tuple[float, float]] = {}

    def train(keys: Sequence[tuple[str, float, int]]) -> None:
        keys = list(dict.fromkeys(keys))
        runs, _ = run_many([Job(name, s, {name: lr}) for name, lr, s in keys], steps=steps,
                           eval_every=eval_every, data=data, desc="doit: tuning")
        for key, r in zip(keys, runs, strict=True):
            last = r.log.iloc[-1]
            loss = float(last.val_loss)
            finite = math.isfinite(loss) and math.isfinite(float(last.train_loss))
            done[key] = (loss if finite else math.inf, float(last.val_acc) if finite else 0.0)

    class _Need(Exception):
        def __init__(self, keys: list[tuple[str, float, int]]) -> None:
            self.keys = keys

    def median(name: str, lr: float, col: int) -> float:
        return float(np.median([done[(name, lr, s)][col] for s in seeds]))

    train([(name, float(lr), s) for name in OPTIMIZERS for lr in grid for s in seeds])
    while True:  # tune every optimizer; train, in one stack, whatever any of them still needs
        tuned: list[Tuned] = []
        need: list[tuple[str, float, int]] = []
        for name in OPTIMIZERS:
            def score(values: Sequence[float], name: str = name) -> list[float]:
                missing = [(name, float(v), s) for v in values for s in seeds
                           if (name, float(v), s) not in done]
                if missing:
                    raise _Need(missing)
                return [median(name, float(v), 0) for v in values]

            try:
                tuned.append(tune(name, score, float(grid[len(grid) // 2]), grid=grid))
            except _Need as e:
                need += e.keys
        if not need:
            break
        train(need)
    rates = {t.method: float(t.choice) for t in tuned}
    if not all(math.isfinite(v) for v in rates.values()):
        raise RuntimeError(f"every rate of the grid diverged for some optimizer: {rates}")
    on_grid = {float(v) for v in grid}
    rows = [{"optimizer": t.method, "lr": float(lr), "val_loss": sc,
             "val_acc": median(t.method, float(lr), 1), "chosen": float(lr) == rates[t.method],
             "extension": float(lr) not in on_grid}
            for t in tuned for lr, sc in zip(t.grid, t.scores, strict=True)]
    return rates, pd.DataFrame(rows), tuned


# ---------------------------------------------------------------------------------------------
# reproduce()
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sizes:
    """Per-scale sizes of :func:`reproduce`."""

    steps: int  # optimizer steps per run (batch 64)
    cycle: int  # tau of the main comparison
    n_ini: int  # cold-start cycles
    halving: int  # halving period n of the exploration weight, in cycles
    seeds: int  # seeds of the comparison (claims report their median)
    grid: tuple[float, ...]  # the common learning-rate grid of the tuning
    taus: tuple[int, ...]  # the cycle lengths of the Explore slider (base seed only)
    eval_every: int
    probe_size: int


SIZES = {
    "smoke": _Sizes(steps=40, cycle=5, n_ini=3, halving=3, seeds=2, grid=(3e-2, 3e-1),
                    taus=(5, 10), eval_every=20, probe_size=64),
    "book": _Sizes(steps=400, cycle=10, n_ini=10, halving=10, seeds=5,
                   grid=(1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0), taus=(5, 10, 25, 50), eval_every=20,
                   probe_size=256),
    "paper": _Sizes(steps=1500, cycle=25, n_ini=10, halving=10, seeds=5,
                    grid=(1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1, 2e-1, 5e-1, 1.0), taus=(5, 10, 25, 50),
                    eval_every=25, probe_size=256),
}


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Tune the candidates (on tuning seeds of their own), run DOIT and every baseline for seeds
    ``seed, seed + 1, ...``, branch DOIT's cycles, sweep the cycle length; return the report with
    its claims (medians over seeds, paired comparisons with their intervals)."""
    from iclr_lab.optimizers.doit._batched import Job, run_many
    from iclr_lab.optimizers.doit.claims import claims_and_acceptance
    from iclr_lab.optimizers.doit.figures import charts

    size = pick(SIZES, scale)
    seed_everything(seed)
    with timed() as elapsed:
        data = digits_split()
        seeds = [seed + i for i in range(size.seeds)]
        kw: dict[str, Any] = {"steps": size.steps, "n_ini": size.n_ini, "halving": size.halving,
                              "eval_every": size.eval_every, "probe_size": size.probe_size,
                              "data": data}
        rates, tuning, tuned = tune_rates(size.grid, seed, steps=size.steps,
                                          eval_every=size.eval_every, data=data)
        # every run of the comparison and of the cycle-length sweep, trained at once; the single
        # optimizers' parameters half-way are the restart figure's trained state
        jobs = [Job(m, s, rates if m not in OPTIMIZERS else {m: rates[m]}, cycle=size.cycle,
                    branch=m == DOIT_NAME) for s in seeds for m in METHODS]
        others = [tau for tau in size.taus if tau != size.cycle]
        jobs += [Job(DOIT_NAME, seed, rates, cycle=tau) for tau in others]
        done, snaps = run_many(jobs, **kw, snapshot_at=size.steps // 2, desc="doit: comparison")
        n_main = len(done) - len(others)
        runs: list[Run] = done[:n_main]
        halfway = {(j.method, rates[j.method]): snap for j, snap in zip(jobs, snaps, strict=False)
                   if j.method in OPTIMIZERS and j.seed == seed}
        main = next(r for r in runs if r.log.method.iloc[0] == DOIT_NAME and r.log.seed.iloc[0] == seed)
        by_tau = dict(zip(others, done[n_main:], strict=True))
        sweep = [(tau, main if tau == size.cycle else by_tau[tau]) for tau in size.taus]
        tables = {
            "tuning": tuning,
            "rates": pd.DataFrame({"optimizer": list(rates), "lr": list(rates.values())}),
            "log": pd.concat([r.log for r in runs], ignore_index=True),
            "cycles": pd.concat([r.cycles for r in runs if len(r.cycles)], ignore_index=True),
            "branches": pd.concat([r.branches for r in runs if len(r.branches)], ignore_index=True),
            **_sweep_tables(sweep),
        }
        tables["probe"] = _probe_table(runs)
        tables["restart"] = restart_shock(rates, tuning, seed, steps=size.steps, cycle=size.cycle,
                                          grid=size.grid, probe_size=size.probe_size, data=data,
                                          warm=halfway)
        tables["final"] = _final(tables["log"])
        tables["decisions"] = _decisions(tables["cycles"], tables["branches"], size.n_ini)
        claims, tables["acceptance"] = claims_and_acceptance(tables, seeds)
    return Report(slug="doit", scale=scale, seed=seed, tables=tables, claims=claims,
                  seconds=elapsed(), chart_builder=charts, tuning=tuned)


def _sweep_tables(sweep: Sequence[tuple[int, Run]]) -> dict[str, pd.DataFrame]:
    """The Explore slider's data: one row per cycle (choice) and one per step (probe loss)."""
    strips, losses = [], []
    for tau, run in sweep:
        for c in run.controller.history:
            strips.append({"tau": tau, "cycle": c.index, "start": c.start_step,
                           "end": c.start_step + len(c.losses), "choice": c.choice, "phase": c.phase,
                           "score": c.score})
            losses += [{"tau": tau, "step": c.start_step + k + 1, "probe_loss": v}
                       for k, v in enumerate(c.losses)]
    return {"tau_cycles": pd.DataFrame(strips), "tau_loss": pd.DataFrame(losses)}


def _probe_table(runs: Sequence[Run]) -> pd.DataFrame:
    """The probe loss after every step of the main DOIT runs (both acquisitions)."""
    rows = []
    for r in runs:
        method = str(r.log.method.iloc[0])
        if method not in (DOIT_NAME, LITERAL):
            continue
        seed = int(r.log.seed.iloc[0])
        for c in r.controller.history:
            rows += [{"method": method, "seed": seed, "step": c.start_step + k + 1, "probe_loss": v,
                      "choice": c.choice} for k, v in enumerate(c.losses)]
    return pd.DataFrame(rows)


def restart_shock(rates: dict[str, float], tuning: pd.DataFrame, seed: int, *, steps: int,
                  cycle: int, grid: Sequence[float], probe_size: int = 256,
                  data: DigitsSplit | None = None,
                  warm: dict[tuple[str, float], list[torch.Tensor]] | None = None) -> pd.DataFrame:
    """What a switch does half-way through training: every candidate, at every rate of the grid,
    restarted with fresh state from one trained state, for one cycle.

    The state is the single optimizer with the lowest tuning objective in ``tuning`` (the median
    validation loss of :func:`tune_rates`), trained at its tuned rate for ``steps // 2`` steps from
    ``seed``. Each restart runs ``cycle`` steps on the same next minibatches and records the probe
    loss before (``l0``), after the first step (``l1``) and at the end (``l_end``), and the cycle's
    score ``s`` (``doit-eq-score``). Every optimizer restarts at every rate of ``grid`` and at its
    tuned rate. ``warm`` may hold that state already (parameters per ``(optimizer, rate)``, as
    ``reproduce`` keeps them from its single-optimizer runs at ``seed``); otherwise it is trained
    here. The restarts train at once, stacked
    (``doit/_batched.py``), each as it would alone.

    ``seed`` is in ``[0, 2**32 - 1]``, ``steps`` at least 1, ``cycle`` in
    ``[1, steps - steps // 2]`` (the restarted cycle fits in the second half), ``grid`` holds
    positive learning rates and ``probe_size`` is in ``[1, n_train]``.
    """
    from iclr_lab.optimizers.doit._batched import Stack

    check_seed(seed)
    check_int("steps", steps, 1)
    check_int("cycle", cycle, 1, steps - steps // 2)
    _check_grid(grid)
    check_int("probe_size", probe_size, 1)
    data = digits_split() if data is None else data
    check_int("probe_size", probe_size, 1, len(data.y_train))
    chosen = tuning[tuning.chosen].sort_values("val_loss", kind="stable")
    warm_name = str(chosen.optimizer.iloc[0])
    model = _mlp(seed)
    batches = batch_indices(len(data.y_train), steps, 64, seed)
    half = steps // 2
    key = (warm_name, float(rates[warm_name]))
    if warm is not None and key in warm:
        with torch.no_grad():
            for param, value in zip(model.parameters(), warm[key], strict=True):
                param.copy_(value)
    else:
        opt = make_optimizer(warm_name, model.parameters(), rates[warm_name])
        for idx in batches[:half]:
            opt.zero_grad(set_to_none=True)
            cross_entropy_closure(model, data.x_train[idx], data.y_train[idx])().backward()
            opt.step()
    probe = _probe(data, seed, probe_size)
    l0 = probe(model)
    pairs = [(name, float(lr)) for name in OPTIMIZERS
             for lr in sorted({float(v) for v in grid} | {float(rates[name])})]
    stack = Stack([model] * len(pairs))
    pick = torch.from_numpy(_probe_pick(data, seed, probe_size))
    xp, yp = data.x_train[pick].expand(stack.size, -1, -1), data.y_train[pick]
    losses: list[list[float]] = [[] for _ in pairs]
    ce = nn.functional.cross_entropy
    for idx in batches[half:half + cycle]:
        for p in stack.params:
            p.grad = None
        logits = stack.forward(data.x_train[idx].expand(stack.size, -1, -1))
        y = data.y_train[idx]
        torch.stack([ce(logits[r], y) for r in range(stack.size)]).sum().backward()
        for name in OPTIMIZERS:
            rows = [r for r, (n, _) in enumerate(pairs) if n == name]
            stack.update(name, rows, [pairs[r][1] for r in rows])
        with torch.no_grad():
            pl = stack.forward(xp)
        for r in range(stack.size):
            losses[r].append(float(ce(pl[r], yp)))
    rows_out = []
    for (name, lr), ls in zip(pairs, losses, strict=True):
        rows_out.append({"optimizer": name, "lr": lr, "tuned": rates[name] == lr, "warm": warm_name,
                         "at_step": half, "l0": l0, "l1": ls[0], "l_end": ls[-1],
                         "score": score(l0, ls)})
    return pd.DataFrame(rows_out)


def _check_grid(grid: Sequence[float]) -> None:
    if len(grid) == 0:
        raise ValueError("grid must hold at least one learning rate, got none")
    for i, lr in enumerate(grid):
        check_range(f"grid[{i}]", lr, 0.0, low_open=True)


def _final(log: pd.DataFrame) -> pd.DataFrame:
    """The last evaluation of every run, plus the number of switches of the switching methods."""
    last = log.sort_values("step").groupby(["method", "seed"], sort=False).tail(1)
    return last[["method", "seed", "step", "val_loss", "val_acc", "test_loss", "test_acc"]] \
        .reset_index(drop=True)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho over the finite pairs; NaN with fewer than 3 pairs or a constant side."""
    from scipy.stats import spearmanr

    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return math.nan
    return float(spearmanr(a[ok], b[ok]).statistic)


def _decisions(cycles: pd.DataFrame, branches: pd.DataFrame, n_ini: int) -> pd.DataFrame:
    """One row per branched cycle of the main DOIT runs: the per-cycle best candidate, DOIT's
    choice, the state-free rule's choice (best mean score so far), the regret in score of each, and
    the Spearman rho of each predictor (surrogate means, means so far) with the realised scores."""
    rows = []
    doit = cycles[cycles.method == DOIT_NAME]
    for s, hist in doit.groupby("seed"):
        br = branches[branches.seed == s]
        names = [c[3:-1] for c in hist.columns if c.startswith("mu[")]
        for i, g in br.groupby("cycle"):
            realised = g.set_index("candidate").branch_score.reindex(names).to_numpy()
            row = hist[hist.cycle == i].iloc[0]
            past = hist[hist.cycle < i]
            means = past.groupby("choice").score.mean().reindex(names).to_numpy()
            # the state-free rule: the best mean score so far; a candidate never tried goes first
            state_free = names[int(np.argmax(np.where(np.isnan(means), np.inf, means)))]
            mu = np.array([row[f"mu[{n}]"] for n in names])
            best = names[int(np.argmax(realised))]
            top = float(realised.max())
            rows.append({
                "seed": s, "cycle": i, "best": best, "doit": row.choice, "state_free": state_free,
                "doit_hit": row.choice == best, "state_free_hit": state_free == best,
                "regret_doit": top - float(realised[names.index(row.choice)]),
                "regret_state_free": top - float(realised[names.index(state_free)]),
                "regret_random": top - float(realised.mean()),
                "rho_gp": _spearman(mu, realised), "rho_state_free": _spearman(means, realised),
                "replay_error": abs(float(row.score) - float(realised[names.index(row.choice)])),
            })
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# the live explorer
# ---------------------------------------------------------------------------------------------


def explorer_chart(tau: int = 10, omega_t: float = 0.0, acquisition: str = "intended",
                   n_ini: int = 10, steps: int = 300, seed: int = 0,
                   candidates: dict[str, float] | None = None) -> alt.VConcatChart:
    """A DOIT run on digits (``steps`` steps, the chapter's MLP) drawn as
    :func:`~iclr_lab.optimizers.doit.figures.timeline_chart`,
    for the cycle length ``tau``, the transferability weight ``omega_t`` (the exploration weight of
    ``doit-eq-coef``) and the acquisition form. ``candidates`` default to
    :data:`~iclr_lab.optimizers.doit.method.DEFAULT_RATES`. ``tau`` and ``steps`` are at least 1,
    ``n_ini`` at least 0, ``omega_t`` in ``[0, 1]`` and ``seed`` in ``[0, 2**32 - 1]``."""
    from iclr_lab.optimizers.doit.method import DEFAULT_RATES

    tau = check_int("tau", tau, 1)
    check_range("omega_t", omega_t, 0.0, 1.0)
    check_choice("acquisition", acquisition, ACQUISITIONS)
    check_int("n_ini", n_ini, 0)
    check_int("steps", steps, 1)
    check_seed(seed)
    from iclr_lab.optimizers.doit.figures import timeline_chart

    rates = dict(DEFAULT_RATES if candidates is None else candidates)
    run = run_method(LITERAL if acquisition == "literal" else DOIT_NAME, seed, rates,
                     steps=check_int("steps", steps, 1), cycle=tau, n_ini=check_int("n_ini", n_ini, 0),
                     eval_every=steps, omega_t=omega_t)
    tables = _sweep_tables([(tau, run)])
    acc = 100 * float(run.log.test_acc.iloc[-1])
    title = (f"τ = {tau}, ω_t = {omega_t:g}, {acquisition} formula: "
             f"test accuracy {acc:.1f} %")
    return timeline_chart(tables["tau_cycles"], tables["tau_loss"], title=title)


def explorer(candidates: dict[str, float] | None = None) -> Any:
    """ipywidgets explorer: a live DOIT run for any cycle length ``tau``, transferability weight
    ``omega_t`` and acquisition form (``doit-eq-coef``), drawn by
    :func:`~iclr_lab.optimizers.doit.figures.timeline_chart`."""
    import ipywidgets as widgets

    from iclr_lab.core.widgets import explorer as make_explorer
    from iclr_lab.core.widgets import slider

    return make_explorer(
        explorer_chart,
        tau=widgets.IntSlider(value=10, min=5, max=50, step=5, description="τ (steps per cycle)",
                              continuous_update=False, style={"description_width": "initial"}),
        omega_t=slider("ω_t (transferability)", 0.0, 0.0, 1.0, 0.1),
        acquisition=widgets.Dropdown(options=list(ACQUISITIONS), value="intended",
                                     description="acquisition"),
        n_ini=widgets.fixed(10), steps=widgets.fixed(300), seed=widgets.fixed(0),
        candidates=widgets.fixed(candidates),
    )


