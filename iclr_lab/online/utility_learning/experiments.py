"""The utility-learning chapter's experiments: ``reproduce()``, its claims, charts and explorer.

The paper has no experiments; every claim here is a numerical check of one of its theorems or a
result of this book. Four experiments, each on several seeds:

* **A. One agent** (Algorithm 1, ``utility_learning-eq-ogd``): Hedge and regret-matching agents
  with random utilities, ``m = 5``; the error against ``T``, beside naive probing (best number of
  design and number of bisection steps in hindsight). Naive probing on a forgetful
  best-responder checks the baseline.
* **B. A head start**: a Hedge agent that has played 200 rounds before the principal arrives.
* **C. Two agents** (Algorithm 2): random 3x3 games; the error against the rounds per phase ``L``
  for one shared ``⊥`` per agent, a fresh ``⊥`` per phase, and no signals.
* **D. Steering** (Algorithm 3 with this book's dominance payments): random Prisoner's Dilemmas,
  welfare objective, ``F(T)`` over all rounds against the oracle that knows the utilities.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.validation import check_choice, check_int, check_range, check_seed
from iclr_lab.online.utility_learning.games import _check_rng
from iclr_lab.online.utility_learning.method import (
    PROBE_DESIGNS,
    SIGNALS,
    Agent,
    BestResponse,
    Hedge,
    NormalFormGame,
    RegretMatching,
    _Arena,
    _contexts,
    _learn,
    naive_probing,
    pay_against,
    prisoners_dilemma,
    random_game,
    random_prisoners_dilemma,
    strategic_center,
)
from iclr_lab.online.utility_learning.steering import STEER_RULES, _steer, optimal_cep, steer

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from iclr_lab.core.report import Claim, Report

__all__ = ["SIZES", "charts", "explorer", "numbers", "random_utilities", "reproduce",
           "steering_paths_chart"]

ALG1 = "Algorithm 1"
PROBE = "naive probing"
AGENTS: dict[str, Agent] = {"Hedge": Hedge(), "regret matching": RegretMatching()}
#: Pairs of learners for the steering explorer (agent 1, agent 2).
PAIRS: dict[str, tuple[Agent, Agent]] = {
    "Hedge and regret matching": (Hedge(), RegretMatching()),
    "two Hedge agents": (Hedge(), Hedge()),
    "two regret matchers": (RegretMatching(), RegretMatching()),
}
HEAD_START = 200
SIGNAL_NAMES = {"shared": "one ⊥ per agent (paper)", "per_phase": "a fresh ⊥ per phase",
                "none": "no signals"}
RULE_NAMES = {"dominance": "learned, dominance payments (book)",
              "cep": "learned, CEP payments only",
              "oracle": "oracle: known utilities, dominance payments",
              "oracle_cep": "known utilities, CEP payments only",
              "none": "no principal"}
#: Thresholds. ``pilot``: set by an independent pre-check of the same experiment; ``prior``: fixed
#: before any run (reasons in the claims' statements and the chapter).
SINGLE_ERR, SINGLE_SLOPE = 0.02, -0.4
TWO_ERR, TWO_SLOPE = 0.08, -0.3
PROBE_FAIL = 0.1
GAP, HALVES = 0.05, 0.5
#: The strictness margin of every paying steering rule (the oracle's whole slack).
MARGIN = 0.05
#: The single-agent slope claim is kept for regret matching only. Hedge's (``single_slope_hedge``,
#: expected not to hold) was replaced by the bound the theorem proves (``single_bound_hedge``): run
#: with ``reproduce --seed 3`` and ``--seed 4`` its median slope was −0.36, because the error of one
#: run jumps by 2-4x between neighbouring horizons (the agent's regret swings with the phase of the
#: payment-agent cycle at T), and Theorem 4.2 bounds the error, not its path below the bound.


@dataclass(frozen=True)
class _Sizes:
    """Per-scale sizes of :func:`reproduce`."""

    seeds: int                      # seeds of every experiment: seed, seed+1, ...
    m: int                          # actions of the single agent
    Ts: tuple[int, ...]             # horizons of experiments A and B
    T_claim: int                    # the horizon of the single-agent error claims
    probes: tuple[int, ...]         # bisection steps per action tried by naive probing
    Ls: tuple[int, ...]             # rounds per phase of experiment C
    L_claim: int                    # the L of the two-agent error claim
    steer_Ts: tuple[int, ...]       # horizons of experiment D


SIZES = {
    "smoke": _Sizes(seeds=2, m=3, Ts=(250, 500, 1000), T_claim=500, probes=(4, 8), Ls=(16, 32),
                    L_claim=32, steer_Ts=(500, 1000)),
    "book": _Sizes(seeds=5, m=5, Ts=(1000, 2000, 4000, 8000, 16_000), T_claim=4000,
                   probes=(4, 8, 12), Ls=(32, 64, 128, 256, 512), L_claim=256,
                   steer_Ts=(4000, 16_000, 64_000)),
    "paper": _Sizes(seeds=10, m=5, Ts=(1000, 4000, 16_000, 64_000), T_claim=4000,
                    probes=(4, 6, 8, 10, 12, 14, 16), Ls=(32, 64, 128, 256, 512, 1024), L_claim=256,
                    steer_Ts=(4000, 16_000, 64_000, 256_000)),
}


def random_utilities(m: int, rng: np.random.Generator) -> np.ndarray:
    """A utility vector of ``m`` actions: uniform on [-1, 1], centred, and shrunk so that its
    largest entry in absolute value is at most 1 (the paper's normalisation). ``m >= 2``; ``rng`` is
    a ``numpy.random.Generator``."""
    _check_rng(rng)
    m = check_int("m", m, 2)
    u = rng.uniform(-1.0, 1.0, m)
    u -= u.mean()
    return u / max(1.0, float(np.abs(u).max()))


# ----------------------------------------------------------------------------------------------
# Experiments
# ----------------------------------------------------------------------------------------------


def _single(sz: _Sizes, seeds: Sequence[int]) -> dict[str, pd.DataFrame]:
    """Experiments A and B: Algorithm 1 and naive probing on one agent, at every horizon."""
    import pandas as pd

    us = np.stack([random_utilities(sz.m, np.random.default_rng([s, 1])) for s in seeds])
    grid = [(k, T) for k in range(len(seeds)) for T in sz.Ts]       # rows of one batch
    u_rows = us[[k for k, _ in grid]]
    T_rows = np.array([T for _, T in grid])
    cases: dict[str, Agent] = {"Hedge": Hedge(), "regret matching": RegretMatching(),
                               "Hedge, head start": Hedge(head_start=HEAD_START)}
    rows: list[dict[str, Any]] = []
    probe_rows: list[dict[str, Any]] = []
    trace: list[dict[str, Any]] = []
    marks = np.unique(np.geomspace(10, max(sz.Ts), 60).astype(int))
    names = list(cases)
    # every agent's runs in one batch (one loop over rounds): block c of the rows is agent
    # order[c]'s, the two Hedge agents next to each other (one learner bank for both)
    order = sorted(names, key=lambda name: cases[name].name)
    run = pay_against(np.tile(u_rows, (len(order), 1)),
                      [cases[name] for name in order for _ in grid], np.tile(T_rows, len(order)),
                      checkpoints=marks)
    for name in names:
        c = order.index(name)
        for j, (k, T) in enumerate(grid):
            r = c * len(grid) + j
            rows.append({"seed": seeds[k], "agent": name, "method": ALG1, "T": T,
                         "error": float(run.error[r]), "design": "", "probes": 0,
                         "principal_regret": float(run.principal_regret[r]),
                         "agent_regret": float(run.agent_regret[r])})
        if name == "Hedge":  # the running estimate of the base seed at the longest horizon
            r = c * len(grid) + grid.index((0, max(sz.Ts)))
            for i, t in enumerate(run.checkpoints):
                trace += [{"t": int(t), "action": f"action {a + 1}",
                           "estimate": float(run.trace[r, i, a]), "true": float(us[0, a])}
                          for a in range(sz.m)]
    # naive probing, both designs, every number of bisection steps, every horizon and every agent,
    # as one batch; the last rows probe the forgetful best-responder (the baseline on the agent it
    # was designed for)
    pgrid = [(k, T, K) for k, T in grid for K in sz.probes]
    dgrid = [(k, T, K, d) for d in PROBE_DESIGNS for k, T, K in pgrid]
    forgetful_rows = [(k, sz.T_claim, max(sz.probes), "flip") for k in range(len(seeds))]
    batch = [(name, g) for name in order for g in dgrid] + [("", g) for g in forgetful_rows]
    est = naive_probing(us[[g[0] for _, g in batch]],
                        [cases[name] if name else BestResponse() for name, _ in batch],
                        [g[1] for _, g in batch], probes=[g[2] for _, g in batch],
                        design=[g[3] for _, g in batch])
    err = np.abs(est - us[[g[0] for _, g in batch]]).max(axis=1)
    for name in names:  # the table in the agents' order
        first = order.index(name) * len(dgrid)
        probe_rows += [{"seed": seeds[k], "agent": name, "T": T, "design": d, "probes": K,
                        "error": float(e)}
                       for (k, T, K, d), e in zip(dgrid, err[first:first + len(dgrid)],
                                                  strict=True)]
    probes = pd.DataFrame(probe_rows)
    # the baseline's tuning knobs, chosen in hindsight: the design and number of bisection steps
    # with the smallest median error over seeds, for each agent and horizon
    keys = ["agent", "T", "design", "probes"]
    med = probes.groupby(keys)["error"].median().reset_index()
    best = med.loc[med.groupby(["agent", "T"])["error"].idxmin(), keys]
    chosen = probes.merge(best, on=keys).assign(method=PROBE)
    single = pd.concat([pd.DataFrame(rows), chosen], ignore_index=True)
    forgetful = pd.DataFrame({"seed": list(seeds), "agent": "best response (forgetful)",
                              "method": PROBE, "T": sz.T_claim, "design": "flip",
                              "probes": max(sz.probes), "error": err[-len(seeds):]})
    return {"single": pd.concat([single, forgetful], ignore_index=True),
            "probing": probes, "trace": pd.DataFrame(trace)}


def _two_agents(sz: _Sizes, seeds: Sequence[int]) -> dict[str, pd.DataFrame]:
    """Experiment C: Algorithm 2 on random 3x3 games, three signal designs, several L."""
    import pandas as pd

    from iclr_lab.core.progress import progress

    games = [random_game((3, 3), np.random.default_rng([s, 2])) for s in seeds]
    U = np.stack([g.utilities for g in games])
    batch = np.concatenate([U] * len(SIGNALS))
    signals = [s for s in SIGNALS for _ in seeds]
    rows: list[dict[str, Any]] = []
    heat: list[dict[str, Any]] = []
    for L in progress(sz.Ls, desc="two agents", total=len(sz.Ls)):
        arena = _Arena(batch, [Hedge(), Hedge()], _contexts((3, 3)))
        every = max(1, L // 8) if L == sz.L_claim else 0
        res = _learn(arena, L, signals, snapshot_every=every)
        rows += [{"seed": seeds[r % len(seeds)], "signals": SIGNAL_NAMES[signals[r]], "L": L,
                  "rounds": res.rounds, "error": float(res.error[r])} for r in range(len(batch))]
        if every:  # the base seed's estimate filling in, shared ⊥
            true = strategic_center(U[0])
            snaps = [(0, np.zeros_like(U))] + res.snapshots
            for t, est in snaps:
                e = strategic_center(est[0])
                done = t // L  # phases finished; the current phase is being learned
                for i in range(2):
                    for a in range(3):
                        for b in range(3):
                            phase = i * 3 + (b if i == 0 else a)
                            heat.append({"round": int(t), "agent": f"agent {i + 1}",
                                         "row": a + 1, "column": b + 1,
                                         "estimate": float(e[i, a, b]),
                                         "true": float(true[i, a, b]),
                                         "state": ("learned" if phase < done else
                                                   "learning" if phase == done and t else
                                                   "unknown")})
    return {"two_agent": pd.DataFrame(rows), "heatmap": pd.DataFrame(heat)}


def _steering(sz: _Sizes, seeds: Sequence[int]) -> dict[str, pd.DataFrame]:
    """Experiment D: every steering rule on random Prisoner's Dilemmas, several horizons."""
    import pandas as pd

    games = [random_prisoners_dilemma(np.random.default_rng([s, 3])) for s in seeds]
    easy = {s: _cep_payment_enforces(g, MARGIN) for s, g in zip(seeds, games, strict=True)}
    batch = [g for g in games for _ in STEER_RULES]
    rules = [r for _ in games for r in STEER_RULES]
    B = len(batch)
    # every horizon in one run: block i of the rows is horizon steer_Ts[i] (independent runs that
    # share the loop over rounds); the longest horizon records its strategy paths
    res = _steer(batch * len(sz.steer_Ts), [Hedge(), Hedge()],
                 np.stack([g.welfare() for g in batch] * len(sz.steer_Ts)),
                 np.repeat(sz.steer_Ts, B), rules * len(sz.steer_Ts), seeds[0], margin=MARGIN,
                 record=True)
    rows: list[dict[str, Any]] = []
    for i, T in enumerate(sz.steer_Ts):
        rows += [{"seed": seeds[r // len(STEER_RULES)], "rule": RULE_NAMES[rules[r]], "T": T,
                  "F": float(res.F[i * B + r]), "F_steer": float(res.F_steer[i * B + r]),
                  "F_star": float(res.F_star[i * B + r]),
                  "learn_rounds": int(res.learn_rounds[i * B + r]),
                  "eps_hat": float(res.eps_hat[i * B + r]), "error": float(res.error[i * B + r]),
                  "obey": float(res.obey[i * B + r]),
                  "cep_enforces": easy[seeds[r // len(STEER_RULES)]]} for r in range(B)]
    # the base seed's strategy paths (rows of the longest horizon's block)
    first = sz.steer_Ts.index(max(sz.steer_Ts)) * B
    target = optimal_cep(games[0], games[0].welfare()).mu
    paths = [{"rule": RULE_NAMES[rules[int(row[0]) - first]], "t": int(row[1]),
              "x1": float(row[2]), "x2": float(row[3]),
              "target1": float(target[0].sum()), "target2": float(target[:, 0].sum())}
             for row in res.paths if int(row[0]) - first < len(STEER_RULES)]
    return {"steering": pd.DataFrame(rows), "paths": pd.DataFrame(paths)}


def _cep_payment_enforces(game: NormalFormGame, margin: float) -> bool:
    """Whether the optimal CEP's own payment (plus ``margin``) makes obeying every recommendation
    the outcome of iterated strict dominance: some agents' obedience is strictly dominant, then,
    with those agents obeying, other agents' obedience is, and so on until every agent obeys.

    When it does, learners that start anywhere end up obeying, and the CEP's payments do what the
    dominance payments do. For a Prisoner's Dilemma steered to (C, C) the test reads
    ``temptation - reward + margin > punishment - sucker``: the payment covers the sucker's loss.
    """
    cep = optimal_cep(game, game.welfare())
    n, shape = game.n, game.shape
    for d in zip(*np.nonzero(cep.mu > 1e-9), strict=True):
        obeying: set[int] = set()
        changed = True
        while changed and len(obeying) < n:
            changed = False
            for i in set(range(n)) - obeying:
                # the others' profiles still possible: the obeying agents play their recommendation
                others = [[d[j]] if j in obeying else range(shape[j]) for j in range(n) if j != i]
                worst = math.inf
                for prof in itertools.product(*others):
                    a = list(prof[:i]) + [d[i]] + list(prof[i:])
                    devs = [game.utilities[(i, *a[:i], b, *a[i + 1:])] for b in range(shape[i])]
                    paid = game.utilities[(i, *a)] + cep.payments[(i, *d)] + margin
                    worst = min(worst, paid - max(devs))
                if worst > 0:
                    obeying.add(i)
                    changed = True
        if len(obeying) < n:
            return False
    return True


# ----------------------------------------------------------------------------------------------
# reproduce
# ----------------------------------------------------------------------------------------------


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Run the chapter's four experiments on seeds ``seed .. seed + seeds - 1``; return the Report.

    Every claim is judged on the median over the seeds, with the range shown next to it.
    """
    from iclr_lab.core.report import Report, timed
    from iclr_lab.core.scales import pick, seed_everything

    sz = pick(SIZES, scale)
    seed_everything(seed)
    seeds = [seed + k for k in range(sz.seeds)]
    with timed() as elapsed:
        tables = {**_single(sz, seeds), **_two_agents(sz, seeds), **_steering(sz, seeds)}
    return Report(slug="utility_learning", scale=scale, seed=seed, tables=tables,
                  claims=_claims(tables, sz), seconds=elapsed(), chart_builder=charts)


def _per_seed(df: pd.DataFrame, col: str = "error") -> list[float]:
    return [float(v) for v in df.sort_values("seed")[col]]


def _bound_ratios(runs: pd.DataFrame, m: int) -> list[float]:
    """Per seed: the largest, over the horizons, of Algorithm 1's error over the bound
    ``(m - 1)(R_0 + R_A)/T`` from the run's realised regrets (``utility_learning-eq-bound``)."""
    bound = (m - 1) * (runs["principal_regret"] + runs["agent_regret"]) / runs["T"]
    ratio = (runs["error"] / bound).where(bound > 0, math.inf)
    return [float(v) for v in ratio.groupby(runs["seed"]).max().sort_index()]


def _slopes(df: pd.DataFrame, x: str) -> list[float]:
    from iclr_lab.core.stats import loglog_slope

    return [loglog_slope(g[x], g["error"])[0] for _, g in df.sort_values(x).groupby("seed")]


def _gap(steer_df: pd.DataFrame, T: int, rule: str = "dominance") -> list[float]:
    """Per seed: the oracle's F minus ``rule``'s F (a key of :data:`RULE_NAMES`; default the
    learned dominance rule) at horizon ``T``."""
    at = steer_df[steer_df["T"] == T].pivot_table(index="seed", columns="rule", values="F")
    return [float(v) for v in at[RULE_NAMES["oracle"]] - at[RULE_NAMES[rule]]]


def _claims(tables: dict[str, pd.DataFrame], sz: _Sizes) -> list[Claim]:
    from iclr_lab.core.report import Claim

    single, two, st = tables["single"], tables["two_agent"], tables["steering"]
    alg1 = single[single["method"] == ALG1]
    probe = single[single["method"] == PROBE]

    def at(df: pd.DataFrame, agent: str, T: int) -> pd.DataFrame:
        return df[(df["agent"] == agent) & (df["T"] == T)]

    T_max, L_max = max(sz.Ts), sz.L_claim
    two_shared = two[two["signals"] == SIGNAL_NAMES["shared"]]
    lo_T, hi_T = min(sz.steer_Ts), max(sz.steer_Ts)
    gap_lo, gap_hi = _gap(st, lo_T), _gap(st, hi_T)
    last = st[st["T"] == hi_T].pivot_table(index="seed", columns="rule", values="F")
    none = last[RULE_NAMES["none"]]
    share = (last[RULE_NAMES["oracle_cep"]] - none) / (last[RULE_NAMES["oracle"]] - none)
    # the two modes of the games: the CEP payment (plus delta_0) makes obedience the outcome of
    # iterated strict dominance, or it does not (``_cep_payment_enforces``)
    enforces = st[st["T"] == hi_T].groupby("seed")["cep_enforces"].first().reindex(share.index)
    share_hard = share[~enforces.astype(bool)].tolist() or [math.nan]
    share_easy = share[enforces.astype(bool)].tolist() or [math.nan]
    # the steering gap against the chapter's accounting: the learned principal's slack of
    # 2 eps_hat per agent (two agents) plus about sqrt(T) rounds of learning, i.e. sqrt(T)/T
    dom = st[(st["T"] == hi_T) & (st["rule"] == RULE_NAMES["dominance"])].sort_values("seed")
    budget = 4.0 * dom["eps_hat"].to_numpy() + 1.0 / math.sqrt(hi_T)
    over_budget = (np.asarray(gap_hi) - budget).tolist()
    # the control of the steering gap: no principal at all, against the same budget
    none_over_budget = (np.asarray(_gap(st, hi_T, "none")) - budget).tolist()
    # the controls of the theorem checks, through the same test: naive probing (the baseline
    # that faces Algorithm 1) and Algorithm 2 without signals (the ablation of the signals)
    probe_ctrl = ("naive probing (design and number of bisection steps chosen in hindsight), "
                  "same agent, same horizons")
    no_signals = two[two["signals"] == SIGNAL_NAMES["none"]]
    thm42 = "Theorem 4.2: ε-learns one agent in T = O((m³ + C²m²)/ε²) rounds, i.e. ε ∝ 1/√T"
    bound_eq = "(m − 1)(R₀ + R_A)/T (utility_learning-eq-bound)"
    claims = []
    for agent in AGENTS:
        tag = "hedge" if agent == "Hedge" else "rm"
        runs = alg1[alg1["agent"] == agent]
        claims += [
            Claim.over_seeds(
                f"single_error_{tag}", f"Algorithm 1 against a {agent} agent, m = {sz.m}: "
                f"max_a |û_a − u_a| at T = {sz.T_claim} is <= {SINGLE_ERR}",
                _per_seed(at(alg1, agent, sz.T_claim)), SINGLE_ERR, "<=", paper=thm42,
                kind="theorem", source="pilot", control=probe_ctrl,
                control_values=_per_seed(at(probe, agent, sz.T_claim))),
            Claim.over_seeds(
                f"single_bound_{tag}", f"Algorithm 1 against a {agent} agent: at every horizon of "
                f"{list(sz.Ts)}, the error over the bound computed from the run's realised regrets, "
                f"{bound_eq}, is <= 1 (the largest ratio over the horizons, per seed). This is "
                "what Theorem 4.2's proof bounds; the √T rate follows from R₀, R_A = O(√T)",
                _bound_ratios(runs, sz.m), 1.0, "<=", paper=thm42, kind="theorem",
                source="paper",
                no_control="the bound is written in Algorithm 1's own regrets R₀ and R_A, which "
                "naive probing does not have; the baseline faces the error test of "
                f"single_error_{tag} instead"),
        ]
    claims.append(Claim.over_seeds(
        "single_slope_rm", "Algorithm 1 against a regret matching agent: fitted log-log slope "
        f"of the error against T over {list(sz.Ts)} is <= {SINGLE_SLOPE} (the theorem's "
        "rate is −1/2)", _slopes(alg1[alg1["agent"] == "regret matching"], "T"), SINGLE_SLOPE,
        "<=", paper=thm42, kind="theorem", source="prior",
        no_control="naive probing cannot face a rate test: its error is fixed once its bisection "
        "steps are spent, the same at every T (its fitted slope is 0 to rounding, ~1e-17, so it "
        "would fail this test by construction); the baseline faces single_error_rm instead"))
    claims += [
        Claim.over_seeds(
            "probing_fails_hedge", f"The baseline on the same test: naive probing (design and number "
            f"of bisection steps chosen in hindsight) against the Hedge agent has error > {SINGLE_ERR} at "
            f"T = {sz.T_claim}", _per_seed(at(probe, "Hedge", sz.T_claim)), SINGLE_ERR, ">",
            paper="naive probing breaks against non-forgetful no-regret agents (Section 1)",
            kind="derivation", source="prior"),
        Claim.over_seeds(
            "probing_forgetful", f"Naive probing (flip design, {max(sz.probes)} bisection steps "
            f"per action) "
            f"against a forgetful best-responder has error <= {SINGLE_ERR} at T = {sz.T_claim}: "
            "the baseline works where its assumption holds",
            _per_seed(at(probe, "best response (forgetful)", sz.T_claim)), SINGLE_ERR, "<=",
            paper="(check of the baseline)", kind="sanity", source="prior"),
        Claim.over_seeds(
            "headstart_slope", f"Algorithm 1 against a Hedge agent with a {HEAD_START}-round head "
            f"start: fitted log-log slope of the error against T is <= {SINGLE_SLOPE}",
            _slopes(alg1[alg1["agent"] == "Hedge, head start"], "T"), SINGLE_SLOPE, "<=",
            paper="Theorem 4.2 holds for any no-regret agent; negative regret does no harm",
            kind="theorem", source="prior", control=probe_ctrl,
            control_values=_slopes(probe[probe["agent"] == "Hedge, head start"], "T")),
        Claim.over_seeds(
            "headstart_probing_fails", f"Naive probing (design and number of steps chosen in hindsight) "
            f"against the head-start agent still has error >= {PROBE_FAIL} at T = {T_max}",
            _per_seed(at(probe, "Hedge, head start", T_max)), PROBE_FAIL, ">=",
            paper="binary search fails against non-forgetful agents (Section 1)",
            kind="derivation", source="prior"),
        Claim.over_seeds(
            "two_agent_error", f"Algorithm 2, random 3×3 games, Hedge agents, one ⊥ per agent: "
            f"error up to strategic equivalence at L = {L_max} rounds per phase is <= {TWO_ERR}",
            _per_seed(two_shared[two_shared["L"] == L_max]), TWO_ERR, "<=",
            paper="Theorem 4.3: poly(M, C)/ε² rounds", expected=False, kind="theorem",
            source="pilot", control="Algorithm 2 without signals, same games and L",
            control_values=_per_seed(no_signals[no_signals["L"] == L_max])),
        Claim.over_seeds(
            "two_agent_slope", f"Algorithm 2, one ⊥ per agent: fitted log-log slope of the error "
            f"against L over {list(sz.Ls)} is <= {TWO_SLOPE}", _slopes(two_shared, "L"), TWO_SLOPE,
            "<=", paper="Theorem 4.3: ε ∝ 1/√L", kind="theorem", source="pilot",
            control="Algorithm 2 without signals, same games and L",
            control_values=_slopes(no_signals, "L")),
        Claim.over_seeds(
            "no_signal_fails", f"The same test without signals: error at L = {L_max} is > {TWO_ERR}",
            _per_seed(two[(two["signals"] == SIGNAL_NAMES["none"]) & (two["L"] == L_max)]),
            TWO_ERR, ">", paper="without signals agents carry Ω(T) negative regret between phases",
            kind="derivation", source="prior"),
        Claim.over_seeds(
            "steer_gap", f"Steering random Prisoner's Dilemmas (welfare objective, F over all "
            f"rounds, learning included): the oracle's F minus Algorithm 3's (dominance payments) "
            f"at T = {hi_T}, less the chapter's accounting of what the learned principal pays for "
            "learning (4ε̂ + √T/T: a slack of 2ε̂ per agent for two agents, with its own gauge ε̂ "
            "of that run, and about √T rounds of learning), is <= 0. (Until this revision the "
            "threshold was a fixed 0.05 on the gap, expected not to hold; the accounting was "
            "proposed by a review that had seen the gaps, hence the source 'pilot'.)",
            over_budget, 0.0, "<=",
            paper="Theorem 5.3: F(T) >= F*(Γ) − poly(M, C)/T^(1/4)", kind="derivation",
            source="pilot", control="no principal, against the same budget",
            control_values=none_over_budget),
        Claim.over_seeds(
            "steer_gap_halves", f"The same gap at T = {hi_T} divided by the gap at T = {lo_T} is "
            f"<= {HALVES} (a seed whose gap at T = {lo_T} is not positive counts as infinite)",
            [float(a / b) if b > 0 else math.inf for a, b in zip(gap_hi, gap_lo, strict=True)],
            HALVES,
            "<=", paper="Theorem 5.3: the gap shrinks like T^(−1/4): ×0.5 from 4000 to 64,000",
            kind="derivation", source="prior"),
        Claim.over_seeds(
            "cep_payments_fail_fresh", f"Known utilities, fresh agents, in the games where the "
            f"CEP's payment plus δ₀ does not make obedience the outcome of iterated strict "
            f"dominance: paying only the CEP's on-path payment recovers at most {HALVES} of the "
            f"oracle's (dominance payments) gain over no principal at T = {hi_T} (median over "
            "those games). (Until this revision the median ran over all games, a bimodal "
            "distribution; restricted after a review, hence the source 'pilot'.)", share_hard,
            HALVES, "<=", paper="(this book's reason for dominance payments)",
            kind="derivation", source="pilot"),
        Claim.over_seeds(
            "cep_payments_work_dominant", f"The other mode: in the games where the CEP's payment "
            f"plus δ₀ does make obedience iterated-strictly dominant, paying only it recovers more "
            f"than {HALVES} of the oracle's gain at T = {hi_T} (median over those games)",
            share_easy, HALVES, ">", paper="(this book's reason for dominance payments)",
            kind="derivation", source="pilot"),
    ]
    return claims


def numbers(report: Report) -> dict[str, float]:
    """Numbers the chapter's prose quotes, computed from ``report.tables`` (glued by the chapter).

    Medians over seeds unless the name says ``base`` (the base seed's run).
    """
    tb = report.tables
    single, two, st = tb["single"], tb["two_agent"], tb["steering"]
    sz_T = sorted(single["T"].unique())
    T_claim = int(single[single["agent"] == "best response (forgetful)"]["T"].iloc[0])
    alg1 = single[single["method"] == ALG1]
    probe = single[single["method"] == PROBE]

    def med(df: pd.DataFrame, col: str = "error") -> float:
        return float(df[col].median())

    steer_T = sorted(st["T"].unique())
    hi = st[st["T"] == steer_T[-1]]
    lo = st[st["T"] == steer_T[0]]
    rule = {k: RULE_NAMES[k] for k in RULE_NAMES}
    dom_hi, dom_lo = hi[hi["rule"] == rule["dominance"]], lo[lo["rule"] == rule["dominance"]]
    Ls = sorted(two["L"].unique())
    m = int(tb["trace"]["action"].nunique())
    out = {
        "seeds": float(single["seed"].nunique()), "m": float(m), "T_claim": float(T_claim),
        "T_min": float(sz_T[0]), "T_max": float(sz_T[-1]), "head_start": float(HEAD_START),
        "probe_hedge": med(probe[(probe["agent"] == "Hedge") & (probe["T"] == T_claim)]),
        "probe_rm": med(probe[(probe["agent"] == "regret matching") & (probe["T"] == T_claim)]),
        "alg1_hs_Tmax": med(alg1[(alg1["agent"] == "Hedge, head start")
                                 & (alg1["T"] == sz_T[-1])]),
        "alg1_hs_Tmin": med(alg1[(alg1["agent"] == "Hedge, head start")
                                 & (alg1["T"] == sz_T[0])]),
        "alg1_hedge_Tmax": med(alg1[(alg1["agent"] == "Hedge") & (alg1["T"] == sz_T[-1])]),
        "bound_ratio": float((alg1["error"] / ((alg1["principal_regret"] + alg1["agent_regret"])
                                               .clip(lower=1e-12) * (m - 1) / alg1["T"])).max()),
        "agent_regret_min": float((alg1["agent_regret"] / np.sqrt(alg1["T"])).min()),
        "L_min": float(Ls[0]), "L_max": float(Ls[-1]),
        "per_phase_Lclaim": med(two[(two["signals"] == SIGNAL_NAMES["per_phase"])
                                    & (two["L"] == 256 if 256 in Ls else two["L"] == Ls[-1])]),
        "rounds_Lclaim": float(two[two["L"] == (256 if 256 in Ls else Ls[-1])]["rounds"].iloc[0]),
        "steer_T_min": float(steer_T[0]), "steer_T_max": float(steer_T[-1]),
        "F_star": med(dom_hi, "F_star"),
        "F_dom_hi": med(dom_hi, "F"), "F_dom_lo": med(dom_lo, "F"),
        "F_oracle_hi": med(hi[hi["rule"] == rule["oracle"]], "F"),
        "F_cep_hi": med(hi[hi["rule"] == rule["cep"]], "F"),
        "F_none_hi": med(hi[hi["rule"] == rule["none"]], "F"),
        "F_oracle_cep_hi": med(hi[hi["rule"] == rule["oracle_cep"]], "F"),
        "eps_hat_hi": med(dom_hi, "eps_hat"), "eps_hat_lo": med(dom_lo, "eps_hat"),
        "learn_err_hi": med(dom_hi, "error"), "learn_err_lo": med(dom_lo, "error"),
        "learn_rounds_hi": float(dom_hi["learn_rounds"].iloc[0]),
        "learn_rounds_lo": float(dom_lo["learn_rounds"].iloc[0]),
        "obey_dom_lo": med(dom_lo, "obey"),
        "obey_oracle_lo": med(lo[lo["rule"] == rule["oracle"]], "obey"),
        "margin": MARGIN, "slack_hi": MARGIN + 2 * med(dom_hi, "eps_hat"),
        "fresh_cep_fail_seeds": float((hi[hi["rule"] == rule["oracle_cep"]]["obey"] < 0.5).sum()),
    }
    # spreads over seeds that the prose quotes
    hedge = alg1[alg1["agent"] == "Hedge"]
    slopes = _slopes(hedge, "T")
    ra = hedge["agent_regret"] / np.sqrt(hedge["T"])
    L_claim = 256 if 256 in Ls else Ls[-1]
    shared = two[(two["signals"] == SIGNAL_NAMES["shared"]) & (two["L"] == L_claim)]["error"]
    wide = hi.pivot_table(index="seed", columns="rule", values="F")
    wide_lo = st[st["T"] == steer_T[0]].pivot_table(index="seed", columns="rule", values="F")
    diff_lo = wide_lo[rule["cep"]] - wide_lo[rule["dominance"]]
    share = (wide[rule["oracle_cep"]] - wide[rule["none"]]) / (wide[rule["oracle"]]
                                                               - wide[rule["none"]])
    easy = hi.drop_duplicates("seed").set_index("seed")["cep_enforces"].astype(bool)
    gap_lo_med = float(np.median(_gap(st, steer_T[0])))
    out.update({
        "hedge_slope_min": float(min(slopes)), "hedge_slope_max": float(max(slopes)),
        # naive probing's error is flat in T: the reason single_slope_rm has no control
        "probe_slope_rm": float(np.median(_slopes(probe[probe["agent"] == "regret matching"], "T"))),
        "ra_swing_min": float(ra.min()), "ra_swing_max": float(ra.max()),
        "two_err_min": float(shared.min()), "two_err_max": float(shared.max()),
        "two_err_passing": float((shared <= TWO_ERR).sum()),
        "easy_games": float(easy.sum()),
        "share_easy_min": float(share[easy].min()) if easy.any() else math.nan,
        "share_hard_max": float(share[~easy].max()) if (~easy).any() else math.nan,
        "learned_cep_vs_dom": float((wide[rule["cep"]] - wide[rule["dominance"]]).abs().max()),
        "learned_cep_minus_dom_lo_max": float(diff_lo.max()),
        "learned_cep_better_lo_games": float((diff_lo > 0.01).sum()),
        "gap_lo": gap_lo_med, "four_eps_hi": 4 * med(dom_hi, "eps_hat"),
        "gap_hi": float(np.median(_gap(st, steer_T[-1]))),
        "steer_budget_hi": float(np.median(4 * dom_hi.sort_values("seed")["eps_hat"]
                                           + 1.0 / math.sqrt(steer_T[-1]))),
        "shared_two_err": float(shared.median()),
        "hedge_err_sqrtT_min": float((hedge["error"] * np.sqrt(hedge["T"])).min()),
        "hedge_err_sqrtT_max": float((hedge["error"] * np.sqrt(hedge["T"])).max()),
        "eps_over_error_hi": float((dom_hi["eps_hat"] / dom_hi["error"]).median()),
        "probe_Tmax": med(probe[(probe["agent"] == "Hedge") & (probe["T"] == sz_T[-1])]),
        "rate_hi": float(steer_T[-1]) ** -0.25,
        # rounds per phase of the steering runs: a 2x2 game has 4 phases
        "L_steer_lo": float(dom_lo["learn_rounds"].iloc[0]) / 4,
        "L_steer_hi": float(dom_hi["learn_rounds"].iloc[0]) / 4,
    })
    return out


# ----------------------------------------------------------------------------------------------
# Charts and the explorer
# ----------------------------------------------------------------------------------------------


def _legend_below(chart: Any) -> Any:
    """The legend under the chart, in two columns, so that long labels fit the page's text column."""
    return chart.configure_legend(orient="bottom", columns=2, labelLimit=330, titleOrient="left")


def _rule_colors(names: Sequence[str]) -> alt.Scale:
    from iclr_lab.core.charts import palette

    method = RULE_NAMES["dominance"]
    return palette(names, highlight=[method] if method in names else None)


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """Named Altair charts built from ``report.tables``."""
    import altair as alt
    import pandas as pd

    from iclr_lab.core.charts import curves, palette

    tb = report.tables
    out: dict[str, alt.TopLevelMixin] = {}

    s = tb["single"]
    s = s[s["agent"].isin(list(AGENTS))].assign(series=lambda d: d["method"] + ", " + d["agent"])
    order = [f"{ALG1}, Hedge", f"{ALG1}, regret matching", f"{PROBE}, Hedge",
             f"{PROBE}, regret matching"]
    main = curves(s, x="T", y="error", color="series", log_x=True, log_y=True,
                  highlight=order[:2], x_title="rounds T", y_title="error max_a |û_a − u_a|",
                  color_title="principal, agent",
                  title="One agent: paying against it vs naive probing (mean, range over seeds)")
    # a line of slope -1/2 through Algorithm 1's median error at the smallest T (the theorem's rate)
    Ts = np.array(sorted(s["T"].unique()), dtype=float)
    start = float(s[(s["method"] == ALG1) & (s["T"] == Ts[0])]["error"].median())
    ref = pd.DataFrame({"T": Ts, "error": start * (Ts / Ts[0]) ** -0.5})
    slope = alt.Chart(ref).mark_line(strokeDash=[6, 4], color="black").encode(x="T:Q", y="error:Q")
    label = alt.Chart(ref.tail(1).assign(text="slope −1/2")).mark_text(
        align="right", dy=14, fontSize=11).encode(x="T:Q", y="error:Q", text="text:N")
    out["single_error"] = _legend_below(_x_ticks(alt.layer(main, slope, label), "T", Ts.tolist()))

    tr = tb["trace"]
    lines = alt.Chart(tr).mark_line().encode(
        x=alt.X("t:Q", scale=alt.Scale(type="log", nice=False), title="round t"),
        y=alt.Y("estimate:Q", title="estimate 1 − mean payment"),
        color=alt.Color("action:N", title=None, scale=palette(sorted(tr["action"].unique()))),
        tooltip=["action", "t", alt.Tooltip("estimate:Q", format=".3f"),
                 alt.Tooltip("true:Q", format=".3f")])
    truth = alt.Chart(tr.drop_duplicates("action")).mark_rule(strokeDash=[5, 3]).encode(
        y="true:Q", color=alt.Color("action:N", scale=palette(sorted(tr["action"].unique()))))
    out["payments"] = alt.layer(lines, truth).properties(
        width=440, height=240,
        title="The average payment reveals the utility (Hedge agent, base seed; dashed: true u)")

    hs = tb["single"]
    hs = hs[hs["agent"] == "Hedge, head start"].assign(series=lambda d: d["method"])
    out["headstart"] = _legend_below(_x_ticks(curves(
        hs, x="T", y="error", color="series", log_x=True, log_y=True, highlight=ALG1,
        x_title="rounds T", y_title="error max_a |û_a − u_a|", color_title="principal",
        title=f"A Hedge agent with a {HEAD_START}-round head start (mean, range over seeds)"),
        "T", Ts.tolist()))

    two = tb["two_agent"]
    out["two_agent"] = _legend_below(_x_ticks(curves(
        two, x="L", y="error", color="signals", log_x=True, log_y=True,
        highlight=SIGNAL_NAMES["shared"], x_title="rounds per phase L",
        y_title="error up to strategic equivalence", color_title="signals",
        title="Two agents, random 3×3 games (mean and range over seeds)"),
        "L", sorted(float(v) for v in two["L"].unique())))

    out["heatmap"] = _heatmap(tb["heatmap"])

    st = tb["steering"].assign(shortfall=lambda d: d["F"] - d["F_star"])
    names = list(RULE_NAMES.values())
    out["steering"] = curves(st, x="T", y="shortfall", color="rule", log_x=True,
                             highlight=RULE_NAMES["dominance"], x_title="rounds T",
                             y_title="F(T) − F*  (over all rounds)", color_title="principal",
                             title="Steering random Prisoner's Dilemmas to their optimal CEP "
                                   "(mean, range over seeds)")
    out["steering"] = _legend_below(_x_ticks(_recolor(out["steering"], names), "T",
                                             sorted(float(v) for v in st["T"].unique())))

    out["paths"] = _cooperation_chart(tb["paths"])
    return out


def _cooperation_chart(paths: pd.DataFrame) -> alt.TopLevelMixin:
    """P(cooperate) of each agent over the rounds under every rule (base seed, longest run),
    learning rounds included; dashed: the optimal CEP's recommendation."""
    import altair as alt
    import pandas as pd

    names = [n for n in RULE_NAMES.values() if n in set(paths["rule"])]
    scale = _rule_colors(names)
    panels = []
    method = RULE_NAMES["dominance"]
    for i in (1, 2):
        df = paths[["rule", "t", f"x{i}"]].rename(columns={f"x{i}": "p"})

        def line(data: pd.DataFrame, width: float) -> alt.Chart:
            return alt.Chart(data).mark_line(strokeWidth=width).encode(
                x=alt.X("t:Q", scale=alt.Scale(type="log", nice=False), title="round t"),
                y=alt.Y("p:Q", scale=alt.Scale(domain=[0, 1]), title="P(cooperate)"),
                color=alt.Color("rule:N", title="principal", scale=scale),
                tooltip=["rule", "t", alt.Tooltip("p:Q", format=".3f")])

        target = pd.DataFrame({"p": [float(paths[f"target{i}"].iloc[0])]})
        rule = alt.Chart(target).mark_rule(strokeDash=[5, 3], color="black").encode(y="p:Q")
        # the book's rule last and thinner, so that the learned CEP rule it overlaps stays visible
        panels.append(alt.layer(line(df[df["rule"] != method], 3.5), line(df[df["rule"] == method], 1.5),
                                rule).properties(width=250, height=200, title=f"agent {i}"))
    return _legend_below(alt.hconcat(*panels).properties(
        title="Cooperation under each principal (base seed, longest run; dashed: recommended)"))


def _x_ticks(chart: alt.TopLevelMixin, field: str, values: Sequence[float]) -> alt.TopLevelMixin:
    """``chart`` with the x axis of ``field`` ticked at ``values`` only (the horizons run), so that
    a log axis does not print colliding labels such as 5,000 and 6,000."""
    from iclr_lab.core.charts import axis

    return axis(chart, field, values=list(values))


def _recolor(chart: alt.TopLevelMixin, names: Sequence[str]) -> alt.TopLevelMixin:
    """Give the ``rule`` colour of ``chart`` the chapter's fixed colours (same rule, same colour)."""
    from iclr_lab.core.charts import recolor

    scale = _rule_colors(names)
    return recolor(chart, dict(zip(scale.domain, scale.range, strict=True)), field="rule")


def _heatmap(df: pd.DataFrame) -> alt.TopLevelMixin:
    """True and estimated (centred) utility tables of both agents, with a slider over rounds that
    works on the static page (Vega filters the embedded snapshots)."""
    import altair as alt

    rounds = sorted(df["round"].unique())
    df = df.assign(step=df["round"].map({r: k for k, r in enumerate(rounds)}))
    long = df.melt(id_vars=["round", "step", "agent", "row", "column", "state"],
                   value_vars=["true", "estimate"], var_name="table", value_name="value")
    long["table"] = long["table"].map({"true": "true U (centred)", "estimate": "estimate Ũ"})
    long.loc[(long["table"] == "estimate Ũ") & (long["state"] == "unknown"), "value"] = 0.0
    long["shown"] = np.where((long["table"] == "estimate Ũ") & (long["state"] == "unknown"), 0.0,
                             1.0)
    slider = alt.param(name="round_step", value=len(rounds) - 1, bind=alt.binding_range(
        min=0, max=len(rounds) - 1, step=1, name="snapshot (round) "))

    def panel(agent: str, table: str) -> Any:
        base = alt.Chart(long).transform_filter(
            (alt.datum.step == slider) & (alt.datum.agent == agent)
            & (alt.datum.table == table)).encode(
            x=alt.X("column:O", title="agent 2's action", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("row:O", title="agent 1's action"))
        cells = base.mark_rect(stroke="white").encode(
            color=alt.Color("value:Q", scale=alt.Scale(scheme="redblue", domain=[-1, 1]),
                            title="utility"),
            opacity=alt.Opacity("shown:Q", scale=alt.Scale(domain=[0, 1], range=[0.08, 1]),
                                legend=None),
            tooltip=["agent", "table", "row", "column", "round", "state",
                     alt.Tooltip("value:Q", format=".3f")])
        text = base.mark_text(fontSize=10).encode(
            text=alt.Text("value:Q", format=".2f"),
            opacity=alt.Opacity("shown:Q", scale=alt.Scale(domain=[0, 1], range=[0, 1]),
                                legend=None))
        return alt.layer(cells, text).properties(width=120, height=120,
                                                 title=f"{agent}: {table}")

    agents = sorted(long["agent"].unique())
    tables = ["true U (centred)", "estimate Ũ"]
    label = alt.Chart(long).transform_filter(alt.datum.step == slider).transform_aggregate(
        round="max(round)").transform_calculate(text="'round ' + datum.round").mark_text(
        align="left", fontSize=13, fontWeight="bold").encode(
        x=alt.value(0), y=alt.value(4), text="text:N")
    rows = [alt.hconcat(*[panel(a, t) for t in tables]) for a in agents]
    return alt.vconcat(label.properties(width=260, height=10), *rows).add_params(
        slider).properties(title="Algorithm 2 filling in a 3×3 game (base seed, one ⊥ per agent; "
                                 "faded: not yet learned)")


def _paths_chart(paths: pd.DataFrame, title: list[str]) -> alt.TopLevelMixin:
    """The path of (P(agent 1 cooperates), P(agent 2 cooperates)) over the rounds, coloured by
    round (log scale); the diamond marks the last round."""
    import altair as alt

    enc = {"x": alt.X("x1:Q", title="P(agent 1 cooperates)", scale=alt.Scale(domain=[0, 1])),
           "y": alt.Y("x2:Q", title="P(agent 2 cooperates)", scale=alt.Scale(domain=[0, 1]))}
    line = alt.Chart(paths).mark_line(color="#bbbbbb", strokeWidth=1).encode(order="t:Q", **enc)
    dots = alt.Chart(paths).mark_circle(size=28, opacity=0.9).encode(
        color=alt.Color("t:Q", scale=alt.Scale(type="log", scheme="viridis"), title="round t"),
        tooltip=["t", alt.Tooltip("x1:Q", format=".3f"), alt.Tooltip("x2:Q", format=".3f")],
        **enc)
    end = alt.Chart(paths.sort_values("t").tail(1)).mark_point(
        shape="diamond", size=160, filled=True, color="#d62728").encode(**enc)
    return alt.layer(line, dots, end).properties(width=300, height=300,
                                                 title=alt.TitleParams(text=title))


def steering_paths_chart(T: int = 3000, rule: str = "dominance", margin: float = MARGIN,
                         agent: str = "Hedge and regret matching", sucker: float = -1.0,
                         seed: int = 0) -> alt.TopLevelMixin:
    """Pure function behind :func:`explorer`: steer the Prisoner's Dilemma (reward 0.6, temptation
    1, punishment −0.4, the given sucker's payoff) for ``T`` rounds and draw the agents' path in
    the unit square of their cooperation probabilities, learning rounds included.

    The CEP's own payment (0.4 for cooperating) makes cooperation dominant when
    ``0.4 + margin > -0.4 - sucker``: raising the sucker's payoff shows where it starts to suffice.

    ``agent`` names the pair of learners (``PAIRS``); two different learners leave the
    diagonal. The title reports ``F(T)`` over all rounds and the value ``F*`` of the optimal CEP.

    ``T >= 17``, ``margin`` in ``[0, inf)``, ``sucker`` in ``[-1, -0.41]`` and ``seed`` in
    ``[0, 2**32 - 1]``.
    """
    import pandas as pd

    T = check_int("T", T, 17)
    check_choice("rule", rule, STEER_RULES)
    check_range("margin", margin, 0.0)
    check_seed(seed)
    check_choice("agent", agent, tuple(PAIRS))
    check_range("sucker", sucker, -1.0, -0.41)
    game = prisoners_dilemma(sucker=sucker)
    res = steer(game, PAIRS[agent], T=T, seed=seed, rule=rule, margin=margin, record=True)
    paths = pd.DataFrame(res.paths, columns=["t", "x1", "x2"]).assign(rule=RULE_NAMES[rule])
    slack = margin + 2 * float(res.eps_hat)
    return _paths_chart(paths, [RULE_NAMES[rule], f"F(T) = {float(res.F):.3f}, F* = "
                                f"{float(res.F_star):.3f}, slack δ = {slack:.3f}"])


def explorer() -> Any:
    """ipywidgets explorer of steering the Prisoner's Dilemma: horizon, payment rule, margin,
    the agents' algorithms and the sucker's payoff."""
    import ipywidgets as widgets

    from iclr_lab.core.widgets import explorer as make_explorer
    from iclr_lab.core.widgets import slider

    return make_explorer(
        steering_paths_chart,
        T=widgets.IntSlider(value=3000, min=500, max=6000, step=500, description="rounds T",
                            continuous_update=False, style={"description_width": "initial"}),
        rule=widgets.Dropdown(options=[(v, k) for k, v in RULE_NAMES.items()], value="dominance",
                              description="principal"),
        margin=slider("margin δ₀", MARGIN, 0.0, 0.3, 0.01),
        agent=widgets.Dropdown(options=list(PAIRS), value="Hedge and regret matching",
                               description="agents"),
        sucker=slider("sucker's payoff", -1.0, -1.0, -0.45, 0.05),
        seed=widgets.fixed(0),
    )
