"""What a chapter's ``reproduce()`` returns: tidy tables, honest claims, and charts built from them.

A :class:`Claim` is one of the paper's claims restated at CPU scale ("SOGD's discounted loss is within
1.6x of per-lambda tuned OGD"). Whether it passed is *derived* from ``measured``, ``op`` and
``threshold``, so it can never disagree with the numbers it reports. A claim that does not reproduce
at small scale is still reported, with ``expected=False``; the chapter explains why.

Every claim says what *kind* of check it is (a result of the paper, a theorem, a derivation of this
book, or a sanity check of the implementation) and where its threshold came from (the paper, fixed
before any run, or set after a pilot run). The scorecard's headline counts only the paper's results:
"2 of 4 paper claims reproduce". A claim measured over several seeds reports their median, with the
range next to it (:meth:`Claim.over_seeds`).
"""

from __future__ import annotations

import html
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from iclr_lab.core.validation import check_choice, check_range, check_real, check_seed

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from iclr_lab.core.tuning import Tuned

__all__ = ["KINDS", "NOT_TESTABLE", "SOURCES", "VERDICTS", "Claim", "ClaimFailure", "Kind", "Report",
           "Source", "Stability", "timed"]

Op = Literal["<=", ">=", "<", ">", "in"]
_OPS: tuple[Op, ...] = ("<=", ">=", "<", ">", "in")

Kind = Literal["paper", "theorem", "derivation", "sanity"]
#: What a claim checks, in the order the scorecard lists them. Only ``paper`` claims count in the
#: headline ("2 of 4 paper claims reproduce").
KINDS: tuple[Kind, ...] = ("paper", "theorem", "derivation", "sanity")
KIND_MEANING: dict[str, str] = {
    "paper": "a result the paper reports",
    "theorem": "a numerical check of a theorem the paper states",
    "derivation": "a result derived in this book, not in the paper",
    "sanity": "an implementation check",
}

Source = Literal["paper", "prior", "pilot"]
#: Where a claim's threshold came from.
SOURCES: tuple[Source, ...] = ("paper", "prior", "pilot")
SOURCE_MEANING: dict[str, str] = {
    "paper": "the paper's own number",
    "prior": "fixed before any run of this experiment",
    "pilot": "set after a pilot run of this same experiment",
}


#: The three verdicts of a paper claim under the claims protocol (:attr:`Claim.verdict`).
VERDICTS: tuple[str, ...] = ("reproduced", "not discriminating", "not reproduced")
VERDICT_MEANING: dict[str, str] = {
    "reproduced": "the method passes, its control fails, and both hold across the seed blocks",
    "not discriminating": "the method passes, but so does its control: the test cannot tell them apart",
    "not reproduced": "the method fails the test",
}
#: The verdict of a paper claim whose premise, fixed before the run, does not hold (at this run,
#: or at more than one seed block): there is nothing to test at this scale. It leaves the headline's
#: count, with its reason (:attr:`Claim.not_testable`).
NOT_TESTABLE = "not testable here"


def _misses() -> int:
    from iclr_lab.core.stability import MISSES_ALLOWED

    return MISSES_ALLOWED


class ClaimFailure(AssertionError):
    """Raised by :meth:`Report.check` when a claim that is expected to hold does not."""


@dataclass(frozen=True)
class Claim:
    """One claim, restated and measured at the scale that ran.

    Attributes:
        name: short identifier, unique within a report (``"sogd_vs_tuned"``).
        statement: the claim in words, with the threshold in it.
        measured: the number the run produced (NaN when the run diverged: the claim then fails;
            NaN and +-inf are accepted for that reason, strings are not). When the experiment runs
            several seeds this is the **median over all of them** (see :meth:`over_seeds`), never
            one favourable seed.
        threshold: the bound; a ``(low, high)`` pair when ``op == "in"``.
        op: how ``measured`` is compared with ``threshold``.
        paper: what the paper reported, in words (units included).
        expected: whether the claim is expected to hold at this scale. Claims with
            ``expected=False`` are reported and explained, never dropped and never tuned.
        kind: what is checked (:data:`KINDS`): ``paper`` (a result the paper reports), ``theorem``
            (a numerical check of a stated theorem), ``derivation`` (derived in this book, not in
            the paper) or ``sanity`` (an implementation check such as "equals AdamW when beta3 = 0").
        source: where the threshold came from (:data:`SOURCES`): ``paper`` (the paper's number),
            ``prior`` (fixed before any run of this experiment) or ``pilot`` (set after a pilot run
            of this same experiment; the scorecard flags it).
        per_seed: the value for each seed the experiment ran, in seed order (empty for a
            deterministic check). ``measured`` must be their median.
        not_testable: for a paper claim whose premise (a condition fixed before the run, e.g.
            "the baseline has a gap to close") fails at this run, the reason; empty otherwise.
            The stability table records it per block, and a claim whose premise fails here, or
            at more than one block, has the verdict ``not testable here`` (:data:`NOT_TESTABLE`)
            and leaves the headline's count. It is not a failure of the build.
    """

    name: str
    statement: str
    measured: float
    threshold: float | tuple[float, float]
    op: Op = "<="
    paper: str = ""
    expected: bool = True
    kind: Kind = field(default="paper", kw_only=True)
    source: Source = field(default="prior", kw_only=True)
    per_seed: tuple[float, ...] = field(default=(), kw_only=True)
    interval: tuple[float, float] | None = field(default=None, kw_only=True)
    control: str = field(default="", kw_only=True)
    control_per_seed: tuple[float, ...] = field(default=(), kw_only=True)
    control_measured: float = field(default=math.nan, kw_only=True)
    control_interval: tuple[float, float] | None = field(default=None, kw_only=True)
    no_control: str = field(default="", kw_only=True)
    regime: str = field(default="", kw_only=True)
    stability: Stability | None = field(default=None, kw_only=True)
    not_testable: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        check_choice("op", self.op, _OPS)
        check_choice("kind", self.kind, KINDS)
        check_choice("source", self.source, SOURCES)
        if self.op == "in" and not (isinstance(self.threshold, tuple) and len(self.threshold) == 2):
            raise TypeError("threshold must be a (low, high) pair when op == 'in'")
        if self.op != "in" and isinstance(self.threshold, tuple):
            raise TypeError(f"threshold must be a number when op == {self.op!r}")
        # NaN and +-inf are allowed: a run that diverged measures NaN, and its claim fails.
        object.__setattr__(self, "measured", check_real("measured", self.measured))
        values = tuple(float(v) for v in self.per_seed)
        object.__setattr__(self, "per_seed", values)
        if values:
            med = _median(values)
            same = (math.isnan(med) and math.isnan(self.measured)) or med == self.measured
            if not same:
                raise ValueError(f"claim {self.name!r}: measured ({self.measured:.6g}) must be the "
                                 f"median of per_seed ({med:.6g}); use Claim.over_seeds")
        controls = tuple(float(v) for v in self.control_per_seed)
        object.__setattr__(self, "control_per_seed", controls)
        if controls:
            object.__setattr__(self, "control_measured", _median(controls))
        object.__setattr__(self, "control_measured",
                           check_real("control_measured", self.control_measured))
        if self.control and self.no_control:
            raise ValueError(f"claim {self.name!r}: give a control or a reason for having none "
                             "(no_control), not both")
        if self.control and math.isnan(self.control_measured) and not controls:
            raise ValueError(f"claim {self.name!r}: the control {self.control!r} needs its value "
                             "(control_per_seed, or control_measured for a single run)")
        for label in ("interval", "control_interval"):
            pair = getattr(self, label)
            if pair is not None:
                object.__setattr__(self, label, (float(pair[0]), float(pair[1])))

    @classmethod
    def over_seeds(cls, name: str, statement: str, values: Sequence[float],
                   threshold: float | tuple[float, float], op: Op = "<=", paper: str = "",
                   expected: bool = True, *, kind: Kind = "paper",
                   source: Source = "prior", control: str = "",
                   control_values: Sequence[float] = (), no_control: str = "",
                   regime: str = "", not_testable: str = "") -> Claim:
        """A claim whose value is the median of ``values``, one per seed (min and max kept).

        The verdict is judged on the median, so one lucky or unlucky seed does not decide it;
        the scorecard shows the min-max range next to it. ``control_values`` are the control's
        values on the same seeds, measured by the same function.
        """
        values = [float(v) for v in values]
        if not values:
            raise ValueError(f"claim {name!r}: values must hold one number per seed, got none")
        controls = tuple(float(v) for v in control_values)
        if controls and len(controls) != len(values):
            raise ValueError(f"claim {name!r}: control_values must hold one number per seed "
                             f"({len(values)}), got {len(controls)}")
        return cls(name, statement, _median(values), threshold, op, paper, expected, kind=kind,
                   source=source, per_seed=tuple(values), control=control,
                   control_per_seed=controls, no_control=no_control, regime=regime,
                   not_testable=not_testable)

    @classmethod
    def paired(cls, name: str, statement: str, method: Sequence[float], baseline: Sequence[float],
               threshold: float, op: Literal["<", "<=", ">", ">="] = "<", paper: str = "",
               expected: bool = True, *, kind: Kind = "paper", source: Source = "prior",
               control: str = "", control_values: Sequence[float] = (), no_control: str = "",
               regime: str = "", level: float = 0.95, not_testable: str = "") -> Claim:
        """A comparison judged on the paired per-seed differences ``method - baseline``.

        ``measured`` is their median; the claim passes only when the median **and** the whole
        t interval of the mean difference (:func:`iclr_lab.core.stats.paired`, at ``level``) lie
        on the side of ``threshold`` that ``op`` asks for: "beats" means the interval clears the
        margin, not only the median. The control, when given, is measured the same way against
        the same baseline (``control_values - baseline``).
        """
        from iclr_lab.core.stats import paired

        diff = paired(method, baseline, level=level)
        ctrl = paired(control_values, baseline, level=level) if len(control_values) else None
        return cls(name, statement, diff.median, threshold, op, paper, expected, kind=kind,
                   source=source, per_seed=diff.differences, interval=(diff.lo, diff.hi),
                   control=control, control_per_seed=ctrl.differences if ctrl else (),
                   control_interval=(ctrl.lo, ctrl.hi) if ctrl else None, no_control=no_control,
                   regime=regime, not_testable=not_testable)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Claim:
        """The claim that :meth:`to_dict` wrote (derived fields such as ``passed`` are recomputed)."""
        thr = d["threshold"]
        stab = d.get("stability")

        def pair(key: str) -> tuple[float, float] | None:
            v = d.get(key)
            return (float(v[0]), float(v[1])) if v is not None else None

        return cls(d["name"], d["statement"], d["measured"], tuple(thr) if isinstance(thr, list) else thr,
                   d["op"], d.get("paper", ""), d.get("expected", True), kind=d.get("kind", "paper"),
                   source=d.get("source", "prior"), per_seed=tuple(d.get("per_seed", ())),
                   interval=pair("interval"), control=d.get("control", ""),
                   control_per_seed=tuple(d.get("control_per_seed", ())),
                   control_measured=_number(d.get("control_measured")),
                   control_interval=pair("control_interval"), no_control=d.get("no_control", ""),
                   regime=d.get("regime", ""),
                   stability=Stability(**stab) if stab else None,
                   not_testable=d.get("not_testable", ""))

    @property
    def passed(self) -> bool:
        """Whether ``measured op threshold`` holds (NaN never passes), and, for a paired
        comparison, whether its whole interval lies on the same side."""
        return _holds(self.measured, self.op, self.threshold) and _clears(
            self.interval, self.op, self.threshold)

    @property
    def control_passed(self) -> bool | None:
        """Whether the control passes the same test (``None`` for a claim without a control)."""
        if not self.control:
            return None
        return _holds(self.control_measured, self.op, self.threshold) and _clears(
            self.control_interval, self.op, self.threshold)

    @property
    def verdict(self) -> str:
        """The three-way verdict of a ``paper`` claim (:data:`VERDICTS`); other kinds: ``holds``
        or ``fails``.

        * ``reproduced``: the method passes, its control fails, and (from the shipped stability
          table) the method holds and the control fails at ``blocks - 1`` or more seed blocks;
        * ``not reproduced``: the method fails (at these seeds, or at more than one seed block),
          whatever its control does;
        * ``not discriminating``: the method passes, here and at the seed blocks, and so does its
          control (at these seeds, or at more than one seed block).

        A paper claim that has neither a control nor a reason for having none (``no_control``),
        or no stability table yet, is ``not judged (no control)`` / ``not judged (no stability
        table)``: the protocol has not been applied to it. One whose premise fails here or at more
        than one seed block is ``not testable here`` (:attr:`not_testable`).
        """
        if self.kind != "paper":
            return "holds" if self.passed else "fails"
        if not self.control and not self.no_control:
            return "not judged (no control)"
        if self.not_testable:
            return NOT_TESTABLE
        if self.stability is None:
            return "not judged (no stability table)"
        if not self.stability.premise_stable:
            return NOT_TESTABLE
        # The method must hold first (here and at the seed blocks); only a claim that holds can
        # fail to discriminate. A method that passes here but misses at two blocks is not
        # reproduced, whether or not its control passes too.
        if not self.passed or not self.stability.method_stable:
            return "not reproduced"
        if self.control_passed:
            return "not discriminating"
        if self.control and not self.stability.control_stable:
            return "not discriminating"
        return "reproduced"

    @property
    def judged(self) -> bool:
        """Whether :attr:`verdict` is one of the three verdicts of the protocol."""
        return not self.verdict.startswith("not judged")

    @property
    def spread(self) -> tuple[float, float] | None:
        """``(min, max)`` over :attr:`per_seed`, or ``None`` for a single-run claim."""
        if len(self.per_seed) < 2:
            return None
        finite = [v for v in self.per_seed if not math.isnan(v)]
        return (min(finite), max(finite)) if finite else (math.nan, math.nan)

    @property
    def seeds_passing(self) -> int | None:
        """How many seeds pass on their own (``None`` for a single-run claim)."""
        if len(self.per_seed) < 2:
            return None
        return sum(_holds(v, self.op, self.threshold) for v in self.per_seed)

    @property
    def result(self) -> str:
        """``pass`` or ``fail``: whether the measurement meets the threshold."""
        return "pass" if self.passed else "fail"

    @property
    def status(self) -> str:
        """The verdict, in words. ``pass`` / ``FAIL`` for expected claims (``FAIL`` breaks the
        build), ``did not reproduce`` / ``pass (not expected)`` for claims not expected to hold."""
        if self.expected:
            return "pass" if self.passed else "FAIL"
        return "pass (not expected)" if self.passed else "did not reproduce"

    @property
    def bound(self) -> str:
        """The comparison as text, e.g. ``<= 1.6`` or ``in [0.35, 0.65]``."""
        if self.op == "in":
            lo, hi = self.threshold  # type: ignore[misc]
            return f"in [{lo:.4g}, {hi:.4g}]"
        return f"{self.op} {float(self.threshold):.4g}"  # type: ignore[arg-type]

    @property
    def value_text(self) -> str:
        """``measured`` with its min-max over seeds, e.g. ``0.74 [0.71-0.89]``; ``-0.83 [-1.67 to 2.22]``
        when a bound is negative (a dash between signed numbers reads as a minus). A paired
        comparison shows its interval instead: ``-0.02 (CI -0.03 to -0.01)``."""
        return _value_text(self.measured, self.spread, self.interval, self.threshold)

    @property
    def control_text(self) -> str:
        """The control's value as :attr:`value_text` writes the method's (empty without one)."""
        if not self.control:
            return ""
        vals = [v for v in self.control_per_seed if not math.isnan(v)]
        spread = (min(vals), max(vals)) if len(self.control_per_seed) > 1 and vals else None
        return _value_text(self.control_measured, spread, self.control_interval, self.threshold)

    def to_dict(self) -> dict[str, Any]:
        thr = list(self.threshold) if isinstance(self.threshold, tuple) else self.threshold
        return {
            "name": self.name,
            "kind": self.kind,
            "statement": self.statement,
            "measured": self.measured,
            "per_seed": list(self.per_seed),
            "threshold": thr,
            "op": self.op,
            "source": self.source,
            "expected": self.expected,
            "passed": self.passed,
            "status": self.status,
            "paper": self.paper,
            "interval": list(self.interval) if self.interval else None,
            "control": self.control,
            "control_measured": None if math.isnan(self.control_measured) else self.control_measured,
            "control_per_seed": list(self.control_per_seed),
            "control_interval": list(self.control_interval) if self.control_interval else None,
            "control_passed": self.control_passed,
            "no_control": self.no_control,
            "regime": self.regime,
            "stability": self.stability.to_dict() if self.stability else None,
            "not_testable": self.not_testable,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class Stability:
    """How a claim fared at the seed blocks of its chapter's shipped stability table.

    ``iclr-lab stability SLUG --blocks 8`` reruns the chapter at disjoint base seeds (the blocks).
    ``holds`` counts the blocks where the method passed, ``control_fails`` those where the control
    failed (``None`` for a claim without a control). A paper claim needs both at ``blocks - 1`` or
    more (:data:`iclr_lab.core.stability.MISSES_ALLOWED`) to count as reproduced.

    ``seed_invariant`` is set when the method measured the same value at every block: the claim
    does not depend on the seed at all (a closed form, a deterministic instance), so its "holds at
    8 of 8" says nothing about seeds, and the text says so.
    """

    blocks: int
    holds: int
    control_fails: int | None = None
    seed_invariant: bool = False
    #: blocks where the claim's premise held, or ``None`` for a claim without a premise
    testable: int | None = None

    @property
    def needed(self) -> int:
        from iclr_lab.core.stability import MISSES_ALLOWED

        return self.blocks - MISSES_ALLOWED

    @property
    def method_stable(self) -> bool:
        return self.holds >= self.needed

    @property
    def premise_stable(self) -> bool:
        """Whether the claim's premise held at enough blocks to judge it; True for a claim
        without a premise."""
        return self.testable is None or self.testable >= self.needed

    @property
    def control_stable(self) -> bool:
        return self.control_fails is None or self.control_fails >= self.needed

    @property
    def text(self) -> str:
        """``7/8`` (the method holds), plus ``control fails 8/8`` when there is a control."""
        out = f"{self.holds}/{self.blocks}"
        if self.control_fails is not None:
            out += f"; control fails {self.control_fails}/{self.blocks}"
        if self.seed_invariant:
            out += " (seed-invariant: the same value at every block)"
        if self.testable is not None and self.testable < self.blocks:
            out += f"; testable at {self.testable}/{self.blocks}"
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"blocks": self.blocks, "holds": self.holds,
                               "control_fails": self.control_fails,
                               "seed_invariant": self.seed_invariant}
        if self.testable is not None:
            out["testable"] = self.testable
        return out


def _number(v: Any) -> float:
    return math.nan if v is None else float(v)


def _shown(v: float, threshold: Any) -> str:
    """``v`` to three significant digits, or more where three would print a threshold's value
    that ``v`` is not (1.003 against ``< 1`` must not read as 1)."""
    bounds = threshold if isinstance(threshold, tuple) else (threshold,)
    ends = [float(b) for b in bounds if isinstance(b, int | float)]
    for digits in (3, 4, 5, 6):
        text = f"{v:.{digits}g}"
        if not math.isfinite(v) or all(float(text) != b or v == b for b in ends):
            return text
    return text


def _value_text(measured: float, spread: tuple[float, float] | None,
                interval: tuple[float, float] | None, threshold: Any = None) -> str:
    text = _shown(measured, threshold)
    if interval is not None:
        lo, hi = interval
        return text + f" (CI {lo:.2g} to {hi:.2g})"
    if spread is not None:
        lo, hi = spread
        sep = " to " if min(lo, hi) < 0 else "\u2013"
        text += f" [{lo:.3g}{sep}{hi:.3g}]"
    return text


def _clears(interval: tuple[float, float] | None, op: str,
            threshold: float | tuple[float, float]) -> bool:
    """Whether a paired comparison's interval lies wholly on the passing side (no interval: True)."""
    if interval is None:
        return True
    lo, hi = interval
    if math.isnan(lo) or math.isnan(hi):
        return False
    if op in ("<", "<="):
        return _holds(hi, op, threshold)
    if op in (">", ">="):
        return _holds(lo, op, threshold)
    return _holds(lo, op, threshold) and _holds(hi, op, threshold)


def _median(values: Sequence[float]) -> float:
    if any(math.isnan(v) for v in values):
        return math.nan
    return float(statistics.median(values))


def _holds(m: float, op: str, threshold: float | tuple[float, float]) -> bool:
    if math.isnan(m):
        return False
    if op == "in":
        lo, hi = threshold  # type: ignore[misc]
        return bool(lo <= m <= hi)
    t = float(threshold)  # type: ignore[arg-type]
    return bool({"<=": m <= t, ">=": m >= t, "<": m < t, ">": m > t}[op])


ChartBuilder = Callable[["Report"], Mapping[str, "alt.TopLevelMixin"]]


@dataclass
class Report:
    """The result of ``reproduce(scale, seed)`` for one chapter.

    Attributes:
        slug: the chapter's slug.
        scale: ``smoke``, ``book`` or ``paper``.
        seed: the base seed; chapters that average over seeds use ``seed, seed+1, ...``.
        claims: the paper's claims measured at this scale. At ``smoke`` scale every claim is
            marked ``expected=False``: a smoke run only checks that the pipeline works.
        tables: tidy DataFrames by name (one row per method x step x seed ...).
        seconds: wall time of the run.
        chart_builder: turns the report into named Altair charts; charts are built on demand so
            that a command-line run without ``--out`` never imports Altair.
        tuning: the equal-tuning record of the compared methods (:mod:`iclr_lab.core.tuning`).
        stale: claims whose shipped stability table disagrees with this run at block 0.
        stability_machine: the CPU the shipped stability table was measured on, when it is
            another kind than this run's (block 0 is then not compared); empty otherwise.
    """

    slug: str
    scale: str
    seed: int
    tables: dict[str, pd.DataFrame]
    claims: list[Claim]
    seconds: float = 0.0
    chart_builder: ChartBuilder | None = field(default=None, repr=False)
    tuning: list[Tuned] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    stability_machine: str = ""

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_range("seconds", self.seconds, 0)
        if self.scale == "smoke":
            # A smoke run only exercises the pipeline; it is too small to judge any claim.
            self.claims = [replace(c, expected=False) for c in self.claims]
        names = [c.name for c in self.claims]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"claim names must be unique; repeated: {sorted(dup)}")
        if self.scale == "book" and self.claims and not self.stale:
            from iclr_lab.core.stability import attach

            attach(self)

    @property
    def judged(self) -> bool:
        """Whether this run judges claims at all (a ``smoke`` run only checks the pipeline)."""
        return self.scale != "smoke"

    @property
    def protocol(self) -> bool:
        """Whether every paper claim went through the claims protocol (a control, or the reason
        for having none, and the chapter's shipped stability table)."""
        paper = [c for c in self.claims if c.kind == "paper"]
        return bool(paper) and all(c.judged for c in paper)

    def claim(self, name: str) -> Claim:
        """The claim called ``name``."""
        for c in self.claims:
            if c.name == name:
                return c
        raise KeyError(f"no claim {name!r}; claims are {[c.name for c in self.claims]}")

    def charts(self) -> dict[str, alt.TopLevelMixin]:
        """Named Altair charts built from :attr:`tables`."""
        return dict(self.chart_builder(self)) if self.chart_builder else {}

    @property
    def failures(self) -> list[Claim]:
        """Claims expected to hold that did not (a claim not testable here is not one)."""
        return [c for c in self.claims if c.expected and not c.passed and not c.not_testable]

    @property
    def ok(self) -> bool:
        return not self.failures

    def check(self) -> Report:
        """Raise :class:`ClaimFailure` listing every expected claim that failed; return ``self``.

        It also fails when the chapter's shipped stability table disagrees with this run at its
        block 0 (:attr:`stale`): the table was made by other code. Chapters call this in a hidden
        cell, so a failed claim, or a stale table, fails the book build.
        """
        lines = [f"{c.name}: measured {c.measured:.4g}, needed {c.bound}" for c in self.failures]
        if self.stale:
            lines.append(f"the shipped stability table's block 0 differs from this run for "
                         f"{self.stale}: remake it with `iclr-lab stability {self.slug}`")
        if lines:
            raise ClaimFailure(f"{self.slug} ({self.scale}, seed {self.seed}): " + "; ".join(lines))
        return self

    def verdict_of(self, claim: Claim) -> str:
        """``claim``'s verdict in this report: ``not judged (smoke scale)`` at smoke scale."""
        return claim.verdict if self.judged else "not judged (smoke scale)"

    def scorecard(self) -> pd.DataFrame:
        """One row per claim, paper claims first: kind, verdict, status, value, the control's
        value, bound and its source, stability over seed blocks."""
        import pandas as pd

        cols = ["claim", "kind", "verdict", "status", "measured", "min", "max", "control",
                "control_measured", "bound", "source", "blocks", "regime", "expected", "statement",
                "paper"]
        rows = []
        for c in self.ordered_claims():
            lo, hi = c.spread or (math.nan, math.nan)
            rows.append({"claim": c.name, "kind": c.kind, "verdict": self.verdict_of(c),
                         "status": c.status, "measured": c.measured, "min": lo, "max": hi,
                         "control": c.control, "control_measured": c.control_measured,
                         "bound": c.bound, "source": c.source,
                         "blocks": c.stability.text if c.stability else "", "regime": c.regime,
                         "expected": c.expected, "statement": c.statement, "paper": c.paper})
        return pd.DataFrame(rows, columns=cols)

    def ordered_claims(self) -> list[Claim]:
        """The claims grouped by kind in :data:`KINDS` order (paper claims first), stable within a kind."""
        return sorted(self.claims, key=lambda c: KINDS.index(c.kind))

    def headline(self) -> str:
        """The verdict line; only ``paper`` claims count, and only *reproduced* ones as reproduced:
        ``"3 of 5 paper claims reproduced (discriminating, stable at >= 7/8 seed blocks); 1 not
        discriminating; 1 not reproduced"``. At smoke scale: ``"smoke scale: claims not judged"``.
        A chapter whose paper claims have not been through the protocol says so and is not counted.
        """
        paper = [c for c in self.claims if c.kind == "paper"]
        if not self.judged:
            return "smoke scale: claims not judged"
        if not paper:
            return "no claim of the paper is checked at this scale"
        noun = "claim" if len(paper) == 1 else "claims"
        if not self.protocol:
            n = sum(c.passed for c in paper)
            return (f"claims protocol not applied yet: {n} of {len(paper)} paper {noun} pass at "
                    "these seeds (no control or no stability table; not counted)")
        untestable = sum(c.verdict == NOT_TESTABLE for c in paper)
        judged = len(paper) - untestable
        noun = "claim" if judged == 1 else "claims"
        counts = {v: sum(c.verdict == v for c in paper) for v in VERDICTS}
        blocks = max((c.stability.blocks for c in paper if c.stability), default=8)
        head = (f"{counts['reproduced']} of {judged} paper {noun} reproduced (discriminating, "
                f"stable at \u2265 {blocks - _misses()}/{blocks} seed blocks)")
        rest = [f"{counts[v]} {v}" for v in VERDICTS[1:] if counts[v]]
        if untestable:
            why = "its premise does not" if untestable == 1 else "their premises do not"
            rest.append(f"{untestable} {NOT_TESTABLE} ({why} hold at this scale)")
        if not judged:
            head = "no paper claim is testable at this scale"
        return "; ".join([head, *rest])

    def tally(self) -> str:
        """The headline, then the other kinds: ``"2 of 4 paper claims reproduce; theorem checks:
        1 of 1 holds; sanity checks: 2 of 2 hold"``, plus any expected claim that failed."""
        parts = [self.headline()]
        for kind in KINDS[1:]:
            group = [c for c in self.claims if c.kind == kind]
            if group:
                n = sum(c.passed for c in group)
                parts.append(f"{kind} checks: {n} of {len(group)} "
                             f"{'holds' if len(group) == 1 else 'hold'}")
        if self.failures:
            parts.append(f"{len(self.failures)} expected to hold FAILED")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object that ``iclr-lab reproduce --json`` prints."""
        return {
            "slug": self.slug,
            "scale": self.scale,
            "seed": self.seed,
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
            "judged": self.judged,
            "protocol": self.protocol,
            "headline": self.headline(),
            "claims": [c.to_dict() for c in self.claims],
            "tuning": [t.to_dict() for t in self.tuning],
            "stale": list(self.stale),
            "stability_machine": self.stability_machine,
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def save(self, out: str | Path, *, png: bool = True) -> list[Path]:
        """Write tables (CSV), charts (HTML, and PNG through vl-convert) and claims (JSON) to ``out``."""
        from iclr_lab.core.charts import save_chart

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, df in self.tables.items():
            path = out / f"{name}.csv"
            df.to_csv(path, index=False)
            written.append(path)
        for name, chart in self.charts().items():
            written += save_chart(chart, out / name, png=png)
        path = out / "claims.json"
        path.write_text(self.to_json(indent=2))
        written.append(path)
        return written

    def _repr_html_(self) -> str:
        """The scorecard as one compact HTML table (notebooks, the book) that fits a page's width.

        A verdict line, then one row per claim: verdict badge and kind, measured median [min-max over
        seeds], the control's value (its name under it), the bound and where it came from, and in
        how many seed blocks the claim held. The statement, the paper's number, the regime and the
        per-seed values open from the claim's name (a ``<details>`` element), so a dozen claims fit
        one screen. Long names and numbers wrap instead of widening the table.
        """
        esc = html.escape
        td = "<td style='padding:2px 5px;vertical-align:top;{}'>{}</td>"
        small = "<br><span style='font-size:0.8em;opacity:0.8'>{}</span>"
        rows = []
        for c in self.ordered_claims():
            word = "FAIL" if c.status == "FAIL" else self.verdict_of(c)
            bg, fg = _BADGES.get(word, _BADGES["not judged"])
            badge = (f'<span style="background:{bg};color:{fg};padding:0 6px;border-radius:9px;'
                     f'font-size:0.82em;white-space:nowrap">{esc(word)}</span>'
                     + small.format(esc(c.kind)))
            detail = [esc(c.statement)]
            if c.paper:
                detail.append(f"<i>Paper:</i> {esc(c.paper)}")
            if c.regime:
                detail.append(f"<i>Regime:</i> {esc(c.regime)}")
            if c.control:
                detail.append(f"<i>Control:</i> {esc(c.control)}, measured by the same test: "
                              f"{esc(c.control_text)} ({'passes' if c.control_passed else 'fails'})")
            elif c.no_control:
                detail.append(f"<i>No control:</i> {esc(c.no_control)}")
            if c.seeds_passing is not None:
                detail.append(f"<i>Seeds passing on their own:</i> {c.seeds_passing} of "
                              f"{len(c.per_seed)} (values {', '.join(f'{v:.3g}' for v in c.per_seed)})")
            # the status is this run's (the base seed's judging seeds); the badge's verdict also
            # weighs the seed blocks, so say which is which
            detail.append(f"<i>Threshold:</i> {esc(SOURCE_MEANING[c.source])}. <i>At base seed "
                          f"{self.seed}:</i> {esc(c.status)}"
                          f"{'' if c.expected else ' (not expected to hold)'}.")
            # a long name breaks after an underscore, never inside a word
            name = (f"<details><summary><code style='overflow-wrap:break-word'>"
                    f"{esc(c.name).replace('_', '_<wbr>')}</code>"
                    f"</summary><div style='font-size:0.9em;max-width:46em'>{'<br>'.join(detail)}"
                    "</div></details>")
            source = esc(c.source) if c.source != "pilot" else "<b>pilot</b>"
            control = (esc(c.control_text) + small.format(esc(c.control))) if c.control else (
                "<span style='font-size:0.8em'>none (see details)</span>" if c.no_control else "")
            blocks = esc(f"{c.stability.holds}/{c.stability.blocks}") if c.stability else ""
            if c.stability and c.stability.control_fails is not None:
                blocks += small.format(f"control fails {c.stability.control_fails}")
            rows.append("<tr>" + "".join(td.format(style, content) for style, content in (
                ("", badge),
                ("", name),
                ("text-align:right", f"<b>{esc(c.value_text)}</b>"),
                ("text-align:right", control),
                ("", esc(c.bound) + small.format(source)),
                ("text-align:right", blocks),
            )) + "</tr>")
        head = "".join(f"<th style='text-align:left;padding:2px 5px'>{h}</th>" for h in (
            "verdict, kind", "claim (click)", "measured", "control", "needed", "seed blocks"))
        caption = (f"<caption style='caption-side:top;text-align:left'><b>{esc(self.headline())}</b>"
                   f"<br><span style='font-size:0.85em'>{esc(self.slug)} &middot; scale "
                   f"<code>{esc(self.scale)}</code> &middot; base seed {self.seed} &middot; "
                   f"{esc(self.tally().partition('; ')[2] or 'no other checks')}</span>"
                   f"{self._tuning_html()}{self._machine_html()}</caption>")
        # the wrapper scrolls sideways rather than spill out of its box, should a table still be
        # wider than the page; the cells wrap so that it is not
        return (f"<div class='iclr-lab-scorecard-wrap' style='overflow-x:auto;max-width:100%'>"
                f"<table class='iclr-lab-scorecard' style='font-size:0.86em;max-width:100%'>"
                f"{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")

    def _machine_html(self) -> str:
        if not self.stability_machine:
            return ""
        return ("<br><span style='font-size:0.85em'>seed blocks measured on "
                f"{html.escape(self.stability_machine)}, another kind of CPU than this run's: its block "
                "0 is not compared with this run (rounding differs between CPUs)</span>")

    def _tuning_html(self) -> str:
        flagged = [t for t in self.tuning if t.flags]
        if not self.tuning:
            return ""
        text = (f"tuning: {len(self.tuning)} methods on equal log grids"
                + (f"; <b>flagged</b>: {'; '.join(html.escape(t.text) for t in flagged)}"
                   if flagged else ", no choice at a grid edge or next to a divergence"))
        return f"<br><span style='font-size:0.85em'>{text}</span>"


#: verdict or status -> (background, text) colours of the badges; readable in light and dark themes.
_BADGES = {
    "reproduced": ("#1a7f37", "#ffffff"),
    "holds": ("#1a7f37", "#ffffff"),
    "not discriminating": ("#9a6700", "#ffffff"),
    "not reproduced": ("#6e7781", "#ffffff"),
    "fails": ("#6e7781", "#ffffff"),
    "FAIL": ("#cf222e", "#ffffff"),
    "not judged": ("#d0d7de", "#1f2328"),
    NOT_TESTABLE: ("#d0d7de", "#1f2328"),
}


@contextmanager
def timed() -> Iterator[Callable[[], float]]:
    """``with timed() as elapsed: ...; seconds = elapsed()``: wall time of a block."""
    start = time.perf_counter()
    end: list[float] = []
    try:
        yield lambda: (end[0] if end else time.perf_counter()) - start
    finally:
        end.append(time.perf_counter())

