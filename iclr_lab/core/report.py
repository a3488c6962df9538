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

from iclr_lab.core.validation import check_choice

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

__all__ = ["KINDS", "SOURCES", "Claim", "ClaimFailure", "Kind", "Report", "Source", "timed"]

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


class ClaimFailure(AssertionError):
    """Raised by :meth:`Report.check` when a claim that is expected to hold does not."""


@dataclass(frozen=True)
class Claim:
    """One claim, restated and measured at the scale that ran.

    Attributes:
        name: short identifier, unique within a report (``"sogd_vs_tuned"``).
        statement: the claim in words, with the threshold in it.
        measured: the number the run produced. When the experiment runs several seeds this is the
            **median over all of them** (see :meth:`over_seeds`), never one favourable seed.
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

    def __post_init__(self) -> None:
        check_choice("op", self.op, _OPS)
        check_choice("kind", self.kind, KINDS)
        check_choice("source", self.source, SOURCES)
        if self.op == "in" and not (isinstance(self.threshold, tuple) and len(self.threshold) == 2):
            raise TypeError("threshold must be a (low, high) pair when op == 'in'")
        if self.op != "in" and isinstance(self.threshold, tuple):
            raise TypeError(f"threshold must be a number when op == {self.op!r}")
        object.__setattr__(self, "measured", float(self.measured))
        values = tuple(float(v) for v in self.per_seed)
        object.__setattr__(self, "per_seed", values)
        if values:
            med = _median(values)
            same = (math.isnan(med) and math.isnan(self.measured)) or med == self.measured
            if not same:
                raise ValueError(f"claim {self.name!r}: measured ({self.measured:.6g}) must be the "
                                 f"median of per_seed ({med:.6g}); use Claim.over_seeds")

    @classmethod
    def over_seeds(cls, name: str, statement: str, values: Sequence[float],
                   threshold: float | tuple[float, float], op: Op = "<=", paper: str = "",
                   expected: bool = True, *, kind: Kind = "paper",
                   source: Source = "prior") -> Claim:
        """A claim whose value is the median of ``values``, one per seed (min and max kept).

        The verdict is judged on the median, so one lucky or unlucky seed does not decide it;
        the scorecard shows the min-max range next to it.
        """
        values = [float(v) for v in values]
        if not values:
            raise ValueError(f"claim {name!r}: values must hold one number per seed, got none")
        return cls(name, statement, _median(values), threshold, op, paper, expected, kind=kind,
                   source=source, per_seed=tuple(values))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Claim:
        """The claim that :meth:`to_dict` wrote (derived fields such as ``passed`` are recomputed)."""
        thr = d["threshold"]
        return cls(d["name"], d["statement"], d["measured"], tuple(thr) if isinstance(thr, list) else thr,
                   d["op"], d.get("paper", ""), d.get("expected", True), kind=d.get("kind", "paper"),
                   source=d.get("source", "prior"), per_seed=tuple(d.get("per_seed", ())))

    @property
    def passed(self) -> bool:
        """Whether ``measured op threshold`` holds (NaN never passes)."""
        return _holds(self.measured, self.op, self.threshold)

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
        when a bound is negative (a dash between signed numbers reads as a minus)."""
        text = f"{self.measured:.3g}"
        if self.spread is not None:
            lo, hi = self.spread
            sep = " to " if min(lo, hi) < 0 else "\u2013"
            text += f" [{lo:.3g}{sep}{hi:.3g}]"
        return text

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
        }


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
    """

    slug: str
    scale: str
    seed: int
    tables: dict[str, pd.DataFrame]
    claims: list[Claim]
    seconds: float = 0.0
    chart_builder: ChartBuilder | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.scale == "smoke":
            # A smoke run only exercises the pipeline; it is too small to judge any claim.
            self.claims = [replace(c, expected=False) for c in self.claims]
        names = [c.name for c in self.claims]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"claim names must be unique; repeated: {sorted(dup)}")

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
        """Claims expected to hold that did not."""
        return [c for c in self.claims if c.expected and not c.passed]

    @property
    def ok(self) -> bool:
        return not self.failures

    def check(self) -> Report:
        """Raise :class:`ClaimFailure` listing every expected claim that failed; return ``self``.

        Chapters call this in a hidden cell, so a failed claim fails the book build.
        """
        if self.failures:
            lines = [f"{c.name}: measured {c.measured:.4g}, needed {c.bound}" for c in self.failures]
            raise ClaimFailure(f"{self.slug} ({self.scale}, seed {self.seed}): " + "; ".join(lines))
        return self

    def scorecard(self) -> pd.DataFrame:
        """One row per claim, paper claims first: kind, status, value, bound and its source."""
        import pandas as pd

        cols = ["claim", "kind", "status", "measured", "min", "max", "bound", "source", "expected",
                "statement", "paper"]
        rows = []
        for c in self.ordered_claims():
            lo, hi = c.spread or (math.nan, math.nan)
            rows.append({"claim": c.name, "kind": c.kind, "status": c.status, "measured": c.measured,
                         "min": lo, "max": hi, "bound": c.bound, "source": c.source,
                         "expected": c.expected, "statement": c.statement, "paper": c.paper})
        return pd.DataFrame(rows, columns=cols)

    def ordered_claims(self) -> list[Claim]:
        """The claims grouped by kind in :data:`KINDS` order (paper claims first), stable within a kind."""
        return sorted(self.claims, key=lambda c: KINDS.index(c.kind))

    def headline(self) -> str:
        """The verdict line: ``"2 of 4 paper claims reproduce"``; only ``paper`` claims count."""
        paper = [c for c in self.claims if c.kind == "paper"]
        if not paper:
            return "no claim of the paper is checked at this scale"
        n = sum(c.passed for c in paper)
        noun = "claim" if len(paper) == 1 else "claims"
        verb = "reproduces" if n == 1 and len(paper) == 1 else "reproduce"
        return f"{n} of {len(paper)} paper {noun} {verb}"

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
            "headline": self.headline(),
            "claims": [c.to_dict() for c in self.claims],
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
        """The scorecard as one compact HTML table (notebooks, the book).

        A verdict line, then one row per claim: kind, status badge, measured median [min-max over
        seeds], the bound and where it came from. The statement and the paper's number open from
        the claim's name (a ``<details>`` element), so a dozen claims fit one screen.
        """
        esc = html.escape
        td = "<td style='padding:2px 6px;vertical-align:top;{}'>{}</td>"
        rows = []
        for c in self.ordered_claims():
            bg, fg = _BADGES[c.status]
            badge = (f'<span style="background:{bg};color:{fg};padding:0 7px;border-radius:9px;'
                     f'font-size:0.85em;white-space:nowrap">{esc(c.status)}</span>')
            detail = [esc(c.statement)]
            if c.paper:
                detail.append(f"<i>Paper:</i> {esc(c.paper)}")
            if c.seeds_passing is not None:
                detail.append(f"<i>Seeds passing on their own:</i> {c.seeds_passing} of "
                              f"{len(c.per_seed)} (values {', '.join(f'{v:.3g}' for v in c.per_seed)})")
            detail.append(f"<i>Threshold:</i> {esc(SOURCE_MEANING[c.source])}.")
            name = (f"<details><summary><code>{esc(c.name)}</code></summary>"
                    f"<div style='font-size:0.9em;max-width:46em'>{'<br>'.join(detail)}</div></details>")
            source = esc(c.source) if c.source != "pilot" else "<b>pilot</b>"
            rows.append("<tr>" + "".join(td.format(style, content) for style, content in (
                ("font-size:0.85em", esc(c.kind)),
                ("", badge),
                ("", name),
                ("text-align:right;white-space:nowrap", f"<b>{esc(c.value_text)}</b>"),
                ("white-space:nowrap", esc(c.bound)),
                ("font-size:0.85em", source),
            )) + "</tr>")
        head = "".join(f"<th style='text-align:left;padding:2px 6px'>{h}</th>" for h in (
            "kind", "status", "claim (click for details)", "measured", "needed", "source"))
        caption = (f"<caption style='caption-side:top;text-align:left'><b>{esc(self.headline())}</b>"
                   f"<br><span style='font-size:0.85em'>{esc(self.slug)} &middot; scale "
                   f"<code>{esc(self.scale)}</code> &middot; base seed {self.seed} &middot; "
                   f"{esc(self.tally().partition('; ')[2] or 'no other checks')}</span></caption>")
        # the wrapper scrolls sideways instead of letting a wide table spill out of its box
        return (f"<div class='iclr-lab-scorecard-wrap' style='overflow-x:auto;max-width:100%'>"
                f"<table class='iclr-lab-scorecard' style='font-size:0.88em'>{caption}"
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


#: status -> (background, text) colours of the badges; readable in light and dark themes.
_BADGES = {
    "pass": ("#1a7f37", "#ffffff"),
    "FAIL": ("#cf222e", "#ffffff"),
    "did not reproduce": ("#6e7781", "#ffffff"),
    "pass (not expected)": ("#0969da", "#ffffff"),
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

