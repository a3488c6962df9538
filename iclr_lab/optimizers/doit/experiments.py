"""The DOIT chapter's experiments: ``reproduce()``, its claims, charts and explorer.

An MLP 64-64-64-10 learns scikit-learn's 8x8 digits from scratch (so ``omega_t = 0``). Five
candidate optimizers are each tuned on one common learning-rate grid (validation accuracy); DOIT
switches between exactly those tuned candidates. Baselines: every single optimizer at its tuned
rate, uniformly random switching, round-robin switching and a SWATS-like Adam-then-SGDM switch, all
with the same batches as DOIT at the same seed.

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
from iclr_lab.core.report import Claim, Report, timed
from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.validation import check_choice, check_int, check_range
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

__all__ = ["BASELINES", "METHODS", "SIZES", "DigitsSplit", "Run", "best_single", "charts",
           "digits_split", "explorer", "explorer_chart", "numbers", "reproduce", "restart_shock",
           "run_method", "timeline_chart", "tune_rates"]

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
    """
    check_choice("method", method, METHODS)
    check_int("steps", steps, 1)
    check_int("probe_size", probe_size, 1)
    data = digits_split() if data is None else data
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
               data: DigitsSplit | None = None) -> tuple[dict[str, float], pd.DataFrame, dict[str, Run]]:
    """Tune every candidate on one learning-rate grid: the rate with the best final validation
    accuracy (ties: lower validation loss). Returns the rates, one row per (optimizer, rate), and
    the chosen runs (which are also the single-optimizer runs at ``seed``).

    The ``len(OPTIMIZERS) * len(grid)`` runs train at once, stacked (``doit/_batched.py``), each
    as :func:`run_method` trains it alone."""
    chosen, table, runs, _ = _tune(grid, seed, steps=steps, eval_every=eval_every,
                                   data=digits_split() if data is None else data)
    return chosen, table, runs


def _tune(grid: Sequence[float], seed: int, *, steps: int, eval_every: int, data: DigitsSplit,
          snapshot_at: int | None = None) -> tuple[dict[str, float], pd.DataFrame, dict[str, Run],
                                                   dict[tuple[str, float], list[torch.Tensor]]]:
    """:func:`tune_rates`, plus every tuning run's parameters after step ``snapshot_at``."""
    from iclr_lab.optimizers.doit._batched import Job, run_many

    pairs = [(name, float(lr)) for name in OPTIMIZERS for lr in grid]
    done, snaps = run_many([Job(name, seed, {name: lr}) for name, lr in pairs], steps=steps,
                           eval_every=eval_every, data=data, snapshot_at=snapshot_at)
    rows, chosen = [], {}
    runs = dict(zip(pairs, done, strict=True))
    for (name, lr), r in runs.items():
        last = r.log.iloc[-1]
        diverged = not math.isfinite(float(last.val_loss))
        rows.append({"optimizer": name, "lr": lr, "seed": seed,
                     "val_acc": 0.0 if diverged else float(last.val_acc),
                     "val_loss": math.inf if diverged else float(last.val_loss),
                     "test_acc": 0.0 if diverged else float(last.test_acc)})
    table = pd.DataFrame(rows)
    for name in OPTIMIZERS:
        g = table[table.optimizer == name].sort_values(["val_acc", "val_loss"],
                                                        ascending=[False, True])
        chosen[name] = float(g.lr.iloc[0])
    table["chosen"] = [chosen[o] == lr for o, lr in zip(table.optimizer, table.lr, strict=True)]
    return (chosen, table, {n: runs[(n, chosen[n])] for n in OPTIMIZERS},
            dict(zip(pairs, snaps, strict=True)))


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
    """Tune the candidates, run DOIT and every baseline for seeds ``seed, seed + 1, ...``, branch
    DOIT's cycles, sweep the cycle length; return the report with its claims (medians over seeds)."""
    size = pick(SIZES, scale)
    seed_everything(seed)
    with timed() as elapsed:
        data = digits_split()
        seeds = [seed + i for i in range(size.seeds)]
        kw: dict[str, Any] = {"steps": size.steps, "cycle": size.cycle, "n_ini": size.n_ini,
                              "halving": size.halving, "eval_every": size.eval_every,
                              "probe_size": size.probe_size, "data": data}
        # the tuning runs are also the single-optimizer runs at `seed`, and the restart figure's
        # trained state (their parameters half-way)
        rates, tuning, tuned_runs, halfway = _tune(size.grid, seed, steps=size.steps,
                                                   eval_every=size.eval_every, data=data,
                                                   snapshot_at=size.steps // 2)
        # every other run of the comparison and of the cycle-length sweep, trained at once
        from iclr_lab.optimizers.doit._batched import Job, run_many

        jobs = [Job(m, s, rates, cycle=size.cycle, branch=m == DOIT_NAME)
                for s in seeds for m in METHODS if not (m in OPTIMIZERS and s == seed)]
        others = [tau for tau in size.taus if tau != size.cycle]
        jobs += [Job(DOIT_NAME, seed, rates, cycle=tau) for tau in others]
        done, _ = run_many(jobs, **{k: v for k, v in kw.items() if k != "cycle"},
                           desc="doit: comparison")
        runs: list[Run] = [tuned_runs[n] for n in OPTIMIZERS] + done[:len(done) - len(others)]
        by_tau = dict(zip(others, done[len(done) - len(others):], strict=True))
        sweep = []
        for tau in size.taus:
            if tau == size.cycle:
                main = next(r for r in runs if r.log.method.iloc[0] == DOIT_NAME
                            and r.log.seed.iloc[0] == seed)
                sweep.append((tau, main))
            else:
                sweep.append((tau, by_tau[tau]))
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
        claims, tables["acceptance"] = _claims(tables, seeds)
    return Report(slug="doit", scale=scale, seed=seed, tables=tables, claims=claims,
                  seconds=elapsed(), chart_builder=charts)


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

    The state is the single optimizer with the best validation accuracy in ``tuning``, trained at its
    tuned rate for ``steps // 2`` steps from ``seed``. Each restart runs ``cycle`` steps on the same
    next minibatches and records the probe loss before (``l0``), after the first step (``l1``) and
    at the end (``l_end``), and the cycle's score ``s`` (``doit-eq-score``). ``warm`` may hold that
    state already (parameters per ``(optimizer, rate)`` of the tuning, as ``reproduce`` keeps them
    from its tuning runs); otherwise it is trained here. The restarts train at once, stacked
    (``doit/_batched.py``), each as it would alone.
    """
    from iclr_lab.optimizers.doit._batched import Stack

    data = digits_split() if data is None else data
    chosen = tuning[tuning.chosen].sort_values(["val_acc", "val_loss"], ascending=[False, True])
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
    pairs = [(name, float(lr)) for name in OPTIMIZERS for lr in grid]
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
# claims
# ---------------------------------------------------------------------------------------------


def _acc(final: pd.DataFrame, method: str, seeds: Sequence[int]) -> np.ndarray:
    f = final[final.method == method].set_index("seed").test_acc
    return 100.0 * f.reindex(list(seeds)).to_numpy()


def best_single(final: pd.DataFrame) -> str:
    """The single optimizer with the highest median final test accuracy over the seeds: the
    strongest baseline, chosen in hindsight on the test set (which favours it)."""
    singles = final[final.method.isin(OPTIMIZERS)]
    med = singles.groupby("method").test_acc.median()
    return str(med.idxmax())


def _text(values: Sequence[float], fmt: str = ".3g") -> str:
    v = np.asarray(values, dtype=float)
    med = float(np.nanmedian(v)) if np.isfinite(v).any() else math.nan
    return f"{med:{fmt}} [{np.nanmin(v):{fmt}}, {np.nanmax(v):{fmt}}]" if len(v) > 1 else f"{med:{fmt}}"


def _claims(tables: dict[str, pd.DataFrame], seeds: Sequence[int]) -> tuple[list[Claim], pd.DataFrame]:
    final, dec = tables["final"], tables["decisions"]
    best = best_single(final)
    ref = _acc(final, best, seeds)
    gap = {m: _acc(final, m, seeds) - ref for m in METHODS}
    # the strongest other contender for each test: the best switching baseline / the runner-up single
    strongest = max(BASELINES, key=lambda m: float(np.median(gap[m])))
    runner_up = max((m for m in OPTIMIZERS if m != best), key=lambda m: float(np.median(gap[m])))

    def per_seed(col: str, fn: Callable[[pd.Series], float]) -> list[float]:
        return [fn(dec[dec.seed == s][col]) if (dec.seed == s).any() else math.nan for s in seeds]

    hit = per_seed("doit_hit", lambda c: float(c.mean()))
    hit_free = per_seed("state_free_hit", lambda c: float(c.mean()))
    margin = [a - b for a, b in zip(hit, hit_free, strict=True)]
    rho = per_seed("rho_gp", lambda c: float(np.nanmedian(c)) if c.notna().any() else math.nan)
    rho_free = per_seed("rho_state_free",
                        lambda c: float(np.nanmedian(c)) if c.notna().any() else math.nan)
    replay = float(dec.replay_error.max()) if len(dec) else math.nan
    claims = [
        Claim.over_seeds(
            "beats_best_single",
            f"DOIT's final test accuracy is at least {BEATS_PP:g} percentage point above the best "
            f"single optimizer's ({best} at its tuned rate), seed by seed (difference in points). "
            f"The strongest switching baseline, {strongest}, scores {_text(gap[strongest])}; DOIT "
            f"with the literal acquisition {_text(gap[LITERAL])}.",
            gap[DOIT_NAME], BEATS_PP, ">=",
            "1 % to 3 % higher accuracy than the best baseline (e.g. ViT on CIFAR-10: 98.04 against "
            "97.58 for SGDM)", expected=False, kind="paper", source="paper"),
        Claim.over_seeds(
            "within_best_single",
            f"DOIT's final test accuracy is within {WITHIN_PP:g} point of the best single "
            f"optimizer's ({best}) (difference in points, >= -{WITHIN_PP:g}). The runner-up single "
            f"optimizer, {runner_up}, scores {_text(gap[runner_up])}; the strongest switching "
            f"baseline, {strongest}, {_text(gap[strongest])}.",
            gap[DOIT_NAME], -WITHIN_PP, ">=",
            "DOIT matches or beats every single optimizer", expected=False, kind="paper",
            source="prior"),
        Claim.over_seeds(
            "oracle_agreement",
            f"After the cold start, DOIT picks the per-cycle best candidate (all candidates branched "
            f"from the same state on the same minibatches) in at least {AGREEMENT:.0%} of the cycles. "
            f"The state-free rule (best mean score so far) scores {_text(hit_free, '.2f')}; a uniform "
            "random pick 0.2.",
            hit, AGREEMENT, ">=",
            "Not in the paper: DOIT's choice is meant to follow the state-dependent best optimizer",
            expected=False, kind="derivation", source="prior"),
        Claim.over_seeds(
            "oracle_vs_state_free",
            "DOIT picks the per-cycle best candidate more often than the state-free rule "
            "(difference of the two hit rates > 0): the state in its surrogates' input helps.",
            margin, 0.0, ">",
            "Not in the paper: the surrogates take the parameter state as input",
            expected=False, kind="derivation", source="prior"),
        Claim.over_seeds(
            "surrogate_spearman",
            f"After the cold start, the median over cycles of Spearman's rho between the surrogates' "
            f"predicted means and the realised scores of the candidates is at least {SPEARMAN:g}. "
            f"The state-free means so far score {_text(rho_free, '.2f')}.",
            rho, SPEARMAN, ">=",
            "Not in the paper: the surrogates predict each optimizer's short-term gain",
            expected=False, kind="derivation", source="prior"),
        Claim("branch_replays_run",
              "The branch of DOIT's own choice reproduces DOIT's cycle score (max |difference| over "
              "all branched cycles and seeds), so the branches are true counterfactuals",
              replay, 1e-9, "<=", "Not in the paper: a check of this chapter's harness",
              kind="sanity", source="prior"),
    ]
    acc_rows = [{"test": f"accuracy − {best}'s (points)", "needed": f"≥ {BEATS_PP:g} (paper), "
                 f"≥ −{WITHIN_PP:g} (within)", "method": m, "value": _text(gap[m])}
                for m in METHODS if m != best]
    acc_rows += [
        {"test": "picks the per-cycle best", "needed": f"≥ {AGREEMENT:g}", "method": DOIT_NAME,
         "value": _text(hit, ".2f")},
        {"test": "picks the per-cycle best", "needed": f"≥ {AGREEMENT:g}",
         "method": "state-free rule", "value": _text(hit_free, ".2f")},
        {"test": "Spearman ρ, prediction vs realised", "needed": f"≥ {SPEARMAN:g}",
         "method": DOIT_NAME + " surrogates", "value": _text(rho, ".2f")},
        {"test": "Spearman ρ, prediction vs realised", "needed": f"≥ {SPEARMAN:g}",
         "method": "state-free means", "value": _text(rho_free, ".2f")},
    ]
    return claims, pd.DataFrame(acc_rows)


# ---------------------------------------------------------------------------------------------
# numbers the prose quotes
# ---------------------------------------------------------------------------------------------


def numbers(report: Report) -> dict[str, float]:
    """Every number the chapter's prose quotes that is not a claim's value, from ``report.tables``
    (medians over seeds). The chapter glues them, so the text cannot drift from the tables."""
    t = report.tables
    final, dec, cyc = t["final"], t["decisions"], t["cycles"]
    seeds = sorted(final.seed.unique())
    best = best_single(final)
    acc = {m: float(np.median(_acc(final, m, seeds))) for m in METHODS}
    main = cyc[cyc.method == DOIT_NAME]
    lit = cyc[cyc.method == LITERAL]
    switches = main.groupby("seed").switched.sum() - 1  # the first cycle is not a switch
    acq = main[main.phase == "acquisition"]
    share = acq.groupby("seed").choice.value_counts(normalize=True).unstack().fillna(0.0)
    values: dict[str, float] = {
        **{f"acc_{_key(m)}": v for m, v in acc.items()},
        "acc_best": acc[best],
        "switches_doit": float(switches.median()),
        "switches_literal": float((lit.groupby("seed").switched.sum() - 1).median()),
        "top_choice_share": float(share.median().max()) if len(share) else math.nan,
        "hit_random": 0.2,
        "regret_doit": float(dec.groupby("seed").regret_doit.sum().median()),
        "regret_state_free": float(dec.groupby("seed").regret_state_free.sum().median()),
        "regret_random": float(dec.groupby("seed").regret_random.sum().median()),
        "branched_cycles": float(dec.groupby("seed").size().median()),
        # the literal form's median per-seed difference from the best single optimizer (points)
        "gap_literal": float(np.median(_acc(final, LITERAL, seeds) - _acc(final, best, seeds))),
        # seeds on which DOIT is within WITHIN_PP of the best single optimizer on their own
        "within_seeds_pass": float(np.sum(_acc(final, DOIT_NAME, seeds) - _acc(final, best, seeds)
                                          >= -WITHIN_PP)),
        # one test image, in points of accuracy
        "test_step": 100.0 / float(len(digits_split().y_test)),
        # the state-free means' Spearman rho, aggregated as surrogate_spearman aggregates DOIT's
        "spearman_state_free": float(np.nanmedian([
            np.nanmedian(g.rho_state_free) if g.rho_state_free.notna().any() else math.nan
            for _, g in dec.groupby("seed")])) if len(dec) else math.nan,
        "cycles_total": float(main.groupby("seed").size().median()),
    }
    names = [c[3:-1] for c in main.columns if c.startswith("mu[")]

    def exploit_share(d: pd.DataFrame) -> float:
        """Share of acquisition cycles whose choice is also the largest surrogate mean."""
        a = d[d.phase == "acquisition"]
        top = a[[f"mu[{n}]" for n in names]].to_numpy().argmax(axis=1)
        return float(np.mean([names[k] == c for k, c in zip(top, a.choice, strict=True)]))

    prev = main.assign(prev=main.groupby("seed").choice.shift())[["seed", "cycle", "prev"]]
    dprev = dec.merge(prev, on=["seed", "cycle"])
    rs = t["restart"]
    up = rs[rs.l_end > rs.l0]
    sizes = {
        "steps": float(final.step.max()),
        "cycle": float(main.groupby("seed").start_step.diff().dropna().min()),
        "n_ini": float((main.phase == "cold start").groupby(main.seed).sum().median()),
        "seeds": float(len(seeds)),
        "grid_min": float(t["tuning"].lr.min()),
        "grid_max": float(t["tuning"].lr.max()),
        "grid_points": float(t["tuning"].lr.nunique()),
        "val_size": float(round(1.0 / np.diff(np.unique(t["tuning"].val_acc)).min())),
    }
    values.update(sizes)
    values.update({
        "exploit_share_doit": exploit_share(main),
        "exploit_share_literal": exploit_share(lit),
        "best_was_previous": float((dprev.best == dprev.prev).mean()),
        "restart_count": float(len(rs)),
        "restart_up": float(len(up)),
        "restart_up_positive": float((up.score > 0).sum()),
        "restart_worst_ratio": float((rs.l_end / rs.l0).max()),
        "restart_worst_score": float(rs.score.to_numpy()[int(np.argmax((rs.l_end / rs.l0).to_numpy()))]),
        "restart_tuned_best_score": float(rs[rs.tuned].score.max()),
        "restart_at_step": float(rs.at_step.iloc[0]),
        "restart_l0": float(rs.l0.iloc[0]),
    })
    return {k: float(v) for k, v in values.items()}


def _key(method: str) -> str:
    return {DOIT_NAME: "doit", LITERAL: "literal", RANDOM: "random", ROUND_ROBIN: "round_robin",
            SWATS: "swats"}.get(method, method.lower())


# ---------------------------------------------------------------------------------------------
# charts
# ---------------------------------------------------------------------------------------------


def _optimizer_scale() -> Any:
    from iclr_lab.core.charts import palette

    return palette(OPTIMIZERS)


def timeline_chart(cycles: pd.DataFrame, losses: pd.DataFrame, *, title: str = "",
                   param: Any = None, width: int = 440) -> alt.VConcatChart:
    """Which optimizer ran when (a coloured strip, one block per cycle), above the probe loss.

    ``cycles`` needs ``start``, ``end``, ``choice`` (and ``phase``, ``score``); ``losses`` needs
    ``step`` and ``probe_loss``. ``param``, an Altair parameter over a ``grid_point`` column present
    in both tables, filters them (the Explore slider).
    """
    import altair as alt

    x = alt.X("start:Q", title=None, axis=alt.Axis(labels=False, ticks=False),
              scale=alt.Scale(domain=[0, float(cycles.end.max())], nice=False))
    strip = alt.Chart(cycles).mark_rect(stroke="white", strokeWidth=0.3).encode(
        x=x, x2="end:Q",
        color=alt.Color("choice:N", title="optimizer", scale=_optimizer_scale()),
        opacity=alt.condition(alt.datum.phase == "cold start", alt.value(0.45), alt.value(1.0)),
        tooltip=["cycle", "choice", "phase", alt.Tooltip("score:Q", format=".3f"), "start", "end"])
    line = alt.Chart(losses).mark_line(color="black", strokeWidth=1.2).encode(
        x=alt.X("step:Q", title="step", scale=alt.Scale(domain=[0, float(cycles.end.max())],
                                                        nice=False)),
        y=alt.Y("probe_loss:Q", title="probe loss (log)", scale=alt.Scale(type="log", nice=False)),
        tooltip=["step", alt.Tooltip("probe_loss:Q", format=".4f")])
    if param is not None:
        strip = strip.transform_filter(alt.datum.grid_point == param)
        line = line.transform_filter(alt.datum.grid_point == param)
    top = strip.properties(width=width, height=46,
                           title=alt.TitleParams(title or "Optimizer per cycle (faded: cold start)",
                                                 fontSize=13))
    return alt.vconcat(top, line.properties(width=width, height=170), spacing=4)


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """The chapter's figures, built from ``report.tables`` only."""
    import altair as alt

    from iclr_lab.core.charts import curves, palette, reference_line, thin

    t = report.tables
    out: dict[str, alt.TopLevelMixin] = {}
    final = t["final"]
    seeds = sorted(final.seed.unique())
    best = best_single(final)
    highlight = [DOIT_NAME, LITERAL]

    # 1. the main claim: accuracy minus the best single optimizer's, per seed, every method
    gaps = []
    for m in METHODS:
        for s, g in zip(seeds, _acc(final, m, seeds) - _acc(final, best, seeds), strict=True):
            gaps.append({"method": m, "seed": int(s), "gap": float(g)})
    gdf = pd.DataFrame(gaps)
    order = list(METHODS)
    scale = palette(order, highlight)
    y = alt.Y("method:N", sort=order, title=None)
    dots = alt.Chart(gdf).mark_point(filled=True, size=40, opacity=0.55).encode(
        x=alt.X("gap:Q", title=f"final test accuracy − {best}'s (points)"), y=y,
        color=alt.Color("method:N", scale=scale, legend=None), tooltip=["method", "seed", "gap"])
    med = alt.Chart(gdf).mark_tick(thickness=3, size=16).encode(
        x="median(gap):Q", y=y, color=alt.Color("method:N", scale=scale, legend=None))
    # the three bounds, labelled above the plot area (not over the dots), at two heights so that
    # the labels do not collide
    rules = pd.DataFrame({"gap": [-WITHIN_PP, 0.0, BEATS_PP],
                          "label": [f"−{WITHIN_PP:g}: within", f"{best}", f"+{BEATS_PP:g}: paper"],
                          "dy": [-6, -20, -6], "color": ["#8c8c8c", "black", "#d62728"]})
    rule = alt.Chart(rules).mark_rule(strokeDash=[6, 4]).encode(
        x="gap:Q", color=alt.Color("color:N", scale=None))
    enc = {"x": "gap:Q", "y": alt.Y("dy:Q", scale=None), "text": "label:N",
           "color": alt.Color("color:N", scale=None)}
    left_text = alt.Chart(rules[rules.gap < 0]).mark_text(align="right", dx=-3, fontSize=11).encode(**enc)
    right_text = alt.Chart(rules[rules.gap >= 0]).mark_text(align="left", dx=3, fontSize=11).encode(**enc)
    out["accuracy_gap"] = (dots + med + rule + left_text + right_text).properties(
        width=420, height=260,
        title=alt.TitleParams("Each seed (dots) and the median (tick)", offset=28))

    # 2. test accuracy during training: DOIT, its literal twin, the best single and the baselines
    log = t["log"]
    shown = [DOIT_NAME, LITERAL, best, *BASELINES]
    acc = log[log.method.isin(shown)].assign(test_acc=lambda d: 100 * d.test_acc)
    out["accuracy_curves"] = curves(acc, x="step", y="test_acc", color="method", highlight=highlight,
                                    x_title="step", y_title="test accuracy (%)",
                                    color_title="method",
                                    title="Test accuracy (band: min–max over seeds)").resolve_legend(
        fill="independent")

    # 3. DOIT's choices, every seed, both acquisitions
    cyc = t["cycles"]
    sub = cyc[cyc.method.isin(highlight)].copy()
    tau = int((sub.groupby(["method", "seed"]).start_step.diff().dropna()).min()) if len(sub) > 1 else 1
    sub["end"] = sub.start_step + tau
    sub["run"] = sub.method.map({DOIT_NAME: "intended", LITERAL: "literal"}) + ", seed " + \
        sub.seed.astype(str)
    out["choices"] = alt.Chart(sub).mark_rect(stroke="white", strokeWidth=0.3).encode(
        x=alt.X("start_step:Q", title="step"), x2="end:Q",
        y=alt.Y("run:N", title=None, sort=sorted(sub.run.unique())),
        color=alt.Color("choice:N", title="optimizer", scale=_optimizer_scale()),
        opacity=alt.condition(alt.datum.phase == "cold start", alt.value(0.45), alt.value(1.0)),
        tooltip=["run", "cycle", "choice", "phase", alt.Tooltip("score:Q", format=".3f")],
    ).properties(width=440, height=16 * sub.run.nunique(),
                 title="DOIT's choice per cycle (faded: cold start)")

    # 4. choosing: cumulative regret in score against the per-cycle best
    dec = t["decisions"]
    if len(dec):
        long = dec.melt(id_vars=["seed", "cycle"],
                        value_vars=["regret_doit", "regret_state_free", "regret_random"],
                        var_name="rule", value_name="regret")
        long["rule"] = long.rule.map({"regret_doit": DOIT_NAME,
                                      "regret_state_free": "state-free (best mean so far)",
                                      "regret_random": "uniform random (expected)"})
        long = long.sort_values(["rule", "seed", "cycle"])
        long["cumulative"] = long.groupby(["rule", "seed"]).regret.cumsum()
        out["regret"] = curves(long, x="cycle", y="cumulative", color="rule", highlight=DOIT_NAME,
                               x_title="cycle", y_title="cumulative regret in score s",
                               color_title="rule", title="Regret against the per-cycle best "
                               "candidate (band: seeds)").resolve_legend(fill="independent")

    # 5. the surrogates: predicted mean against realised score, every branched cycle
    br = t["branches"]
    main = cyc[cyc.method == DOIT_NAME]
    if len(br):
        names = [c[3:-1] for c in main.columns if c.startswith("mu[")]
        pred = main.melt(id_vars=["seed", "cycle"], value_vars=[f"mu[{n}]" for n in names],
                         var_name="candidate", value_name="predicted")
        pred["candidate"] = pred.candidate.str[3:-1]
        cal = br.merge(pred, on=["seed", "cycle", "candidate"]).dropna()
        cal = cal[cal.predicted.abs() > 0]  # drop the prior's exact zero (no data yet)
        out["calibration"] = alt.Chart(cal).mark_point(size=18, opacity=0.5, filled=True).encode(
            x=alt.X("predicted:Q", title="surrogate mean μ_j at the cycle's start"),
            y=alt.Y("branch_score:Q", title="realised score s_j of the branch"),
            color=alt.Color("candidate:N", title="optimizer", scale=_optimizer_scale()),
            tooltip=["seed", "cycle", "candidate", alt.Tooltip("predicted:Q", format=".3f"),
                     alt.Tooltip("branch_score:Q", format=".3f")],
        )
        lo, hi = float(min(cal.predicted.min(), cal.branch_score.min())), float(
            max(cal.predicted.max(), cal.branch_score.max()))
        diag = alt.Chart(pd.DataFrame({"predicted": [lo, hi], "branch_score": [lo, hi]})).mark_line(
            strokeDash=[6, 4], color="black").encode(x="predicted:Q", y="branch_score:Q")
        out["calibration"] = (out["calibration"] + diag).properties(
            width=300, height=260, title="Predicted against realised score (dashed: equal)")

    # 6. a switch half-way through: every candidate restarted with fresh state, at every rate
    rs = t["restart"].assign(first=lambda d: d.l1 / d.l0, end=lambda d: d.l_end / d.l0)
    rs["marker"] = np.where(rs.tuned, "tuned rate", "other rate")
    col = alt.Color("optimizer:N", title="optimizer", scale=_optimizer_scale())
    size_ = alt.Size("marker:N", title=None, scale=alt.Scale(domain=["tuned rate", "other rate"],
                                                              range=[110, 25]))
    tips = ["optimizer", "lr", "tuned", alt.Tooltip("first:Q", format=".3g"),
            alt.Tooltip("end:Q", format=".3g"), alt.Tooltip("score:Q", format=".3f")]
    shock = alt.Chart(rs).mark_line(point=True, strokeWidth=1).encode(
        x=alt.X("lr:Q", scale=alt.Scale(type="log", nice=False), title="learning rate"),
        y=alt.Y("first:Q", scale=alt.Scale(type="log", nice=False),
                title="probe loss after 1 fresh step ÷ before",
                axis=alt.Axis(format="~s", labelOverlap="greedy")),
        color=col, tooltip=tips)
    tuned = alt.Chart(rs[rs.tuned]).mark_point(filled=True, size=110).encode(
        x="lr:Q", y="first:Q", color=col, tooltip=tips)
    left = (shock + tuned + reference_line(1.0, label="no change")).properties(
        width=250, height=230, title="The first step after a switch")
    right = (alt.Chart(rs).mark_point(filled=True, opacity=0.8).encode(
        x=alt.X("end:Q", scale=alt.Scale(type="log", nice=False),
                title="probe loss after the cycle ÷ before",
                axis=alt.Axis(format="~s", values=[0.5, 1, 10, 100, 1000, 10000, 100000])),
        y=alt.Y("score:Q", title="score s of the cycle"), color=col, size=size_, tooltip=tips)
        # unlabelled rules (a label would sit on the axis or on the markers): the subtitle names them
        + reference_line(0.0) + reference_line(1.0, axis="x")
    ).properties(width=250, height=230,
                 title=alt.TitleParams("The score against the loss change",
                                       subtitle="dashed: s = 0 and no change of the loss"))
    out["restart"] = alt.hconcat(left, right).resolve_scale(color="shared")

    # 7. the Explore slider over tau
    tc, tl = t["tau_cycles"], thin(t["tau_loss"], "step", points=200)
    taus = sorted(tc.tau.unique())
    index = {v: i for i, v in enumerate(taus)}
    tc, tl = tc.assign(grid_point=tc.tau.map(index)), tl.assign(grid_point=tl.tau.map(index))
    first = taus.index(10) if 10 in taus else len(taus) // 2
    param = alt.param(name="tau_param", value=first, bind=alt.binding_range(
        min=0, max=len(taus) - 1, step=1, name="τ (grid point) "))
    label = alt.Chart(pd.DataFrame({"grid_point": range(len(taus)),
                                    "label": [f"τ = {v} steps" for v in taus]})).transform_filter(
        alt.datum.grid_point == param).mark_text(align="left", baseline="bottom", fontSize=13,
                                                 fontWeight="bold").encode(
        x=alt.value(6), y=alt.value(164), text="label:N")
    chart = timeline_chart(tc, tl, param=param, title="Optimizer per cycle at the chosen τ")
    chart.vconcat[1] = chart.vconcat[1] + label
    out["tau_slider"] = chart.add_params(param)
    return out


# ---------------------------------------------------------------------------------------------
# the live explorer
# ---------------------------------------------------------------------------------------------


def explorer_chart(tau: int = 10, omega_t: float = 0.0, acquisition: str = "intended",
                   n_ini: int = 10, steps: int = 300, seed: int = 0,
                   candidates: dict[str, float] | None = None) -> alt.VConcatChart:
    """A DOIT run on digits (``steps`` steps, the chapter's MLP) drawn as :func:`timeline_chart`,
    for the cycle length ``tau``, the transferability weight ``omega_t`` (the exploration weight of
    ``doit-eq-coef``) and the acquisition form. ``candidates`` default to
    :data:`~iclr_lab.optimizers.doit.method.DEFAULT_RATES`."""
    from iclr_lab.optimizers.doit.method import DEFAULT_RATES

    tau = check_int("tau", int(round(tau)), 1)
    check_range("omega_t", omega_t, 0.0, 1.0)
    check_choice("acquisition", acquisition, ACQUISITIONS)
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
    ``omega_t`` and acquisition form (``doit-eq-coef``), drawn by :func:`timeline_chart`."""
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


