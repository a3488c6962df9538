"""What a chapter's ``reproduce()`` returns: tidy tables, honest claims, and charts built from them.

A :class:`Claim` is one of the paper's claims restated at CPU scale ("SOGD's discounted loss is within
1.6x of per-lambda tuned OGD"). Whether it passed is *derived* from ``measured``, ``op`` and
``threshold``, so it can never disagree with the numbers it reports. A claim that does not reproduce
at small scale is still reported, with ``expected=False``; the chapter explains why.
"""

from __future__ import annotations

import html
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from iclr_lab.core.validation import check_choice

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

__all__ = ["Claim", "ClaimFailure", "Report", "timed"]

Op = Literal["<=", ">=", "<", ">", "in"]
_OPS: tuple[Op, ...] = ("<=", ">=", "<", ">", "in")


class ClaimFailure(AssertionError):
    """Raised by :meth:`Report.check` when a claim that is expected to hold does not."""


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, restated and measured at the scale that ran.

    Attributes:
        name: short identifier, unique within a report (``"sogd_vs_tuned"``).
        statement: the claim in words, with the threshold in it.
        measured: the number the run produced.
        threshold: the bound; a ``(low, high)`` pair when ``op == "in"``.
        op: how ``measured`` is compared with ``threshold``.
        paper: what the paper reported, in words (units included).
        expected: whether the claim is expected to hold at this scale. Claims with
            ``expected=False`` are reported and explained, never dropped and never tuned.
    """

    name: str
    statement: str
    measured: float
    threshold: float | tuple[float, float]
    op: Op = "<="
    paper: str = ""
    expected: bool = True

    def __post_init__(self) -> None:
        check_choice("op", self.op, _OPS)
        if self.op == "in" and not (isinstance(self.threshold, tuple) and len(self.threshold) == 2):
            raise TypeError("threshold must be a (low, high) pair when op == 'in'")
        if self.op != "in" and isinstance(self.threshold, tuple):
            raise TypeError(f"threshold must be a number when op == {self.op!r}")
        object.__setattr__(self, "measured", float(self.measured))

    @property
    def passed(self) -> bool:
        """Whether ``measured op threshold`` holds (NaN never passes)."""
        m = self.measured
        if math.isnan(m):
            return False
        if self.op == "in":
            lo, hi = self.threshold  # type: ignore[misc]
            return bool(lo <= m <= hi)
        t = float(self.threshold)  # type: ignore[arg-type]
        return bool({"<=": m <= t, ">=": m >= t, "<": m < t, ">": m > t}[self.op])

    @property
    def status(self) -> str:
        """``pass``, ``FAIL`` (expected to hold, did not), or ``not reproduced`` / ``holds anyway``."""
        if self.expected:
            return "pass" if self.passed else "FAIL"
        return "holds anyway" if self.passed else "not reproduced"

    @property
    def bound(self) -> str:
        """The comparison as text, e.g. ``<= 1.6`` or ``in [0.35, 0.65]``."""
        if self.op == "in":
            lo, hi = self.threshold  # type: ignore[misc]
            return f"in [{lo:.4g}, {hi:.4g}]"
        return f"{self.op} {float(self.threshold):.4g}"  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        thr = list(self.threshold) if isinstance(self.threshold, tuple) else self.threshold
        return {
            "name": self.name,
            "statement": self.statement,
            "measured": self.measured,
            "threshold": thr,
            "op": self.op,
            "passed": self.passed,
            "expected": self.expected,
            "paper": self.paper,
        }


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
        """One row per claim: statement, measured, bound, paper, status."""
        import pandas as pd

        rows = [
            {
                "claim": c.name,
                "statement": c.statement,
                "measured": c.measured,
                "bound": c.bound,
                "paper": c.paper,
                "status": c.status,
            }
            for c in self.claims
        ]
        return pd.DataFrame(rows, columns=["claim", "statement", "measured", "bound", "paper", "status"])

    def tally(self) -> str:
        """Counts of claims by status, e.g. ``"5 pass, 1 holds anyway, 2 not reproduced"``."""
        order = ["pass", "FAIL", "holds anyway", "not reproduced"]
        counts = {s: sum(c.status == s for c in self.claims) for s in order}
        return ", ".join(f"{n} {s}" for s, n in counts.items() if n)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object that ``iclr-lab reproduce --json`` prints."""
        return {
            "slug": self.slug,
            "scale": self.scale,
            "seed": self.seed,
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
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
        """The scorecard as a compact HTML table with coloured status badges (notebooks, the book)."""
        cells = []
        for c in self.claims:
            bg, fg = _BADGES[c.status]
            badge = (f'<span style="background:{bg};color:{fg};padding:1px 7px;border-radius:9px;'
                     f'font-size:0.85em;white-space:nowrap">{html.escape(c.status)}</span>')
            cells.append("<tr>" + "".join(
                f"<td style='padding:3px 6px;vertical-align:top;{style}'>{content}</td>"
                for style, content in (
                    ("", badge),
                    ("", f"<code>{html.escape(c.name)}</code><br>"
                         f"<span style='font-size:0.9em'>{html.escape(c.statement)}</span>"),
                    ("text-align:right;white-space:nowrap", f"<b>{c.measured:.3g}</b>"),
                    ("white-space:nowrap", html.escape(c.bound)),
                    ("font-size:0.85em", html.escape(c.paper)),
                )) + "</tr>")
        head = "".join(f"<th style='text-align:left'>{h}</th>"
                       for h in ("status", "claim", "measured", "needed", "paper"))
        caption = (f"<caption style='caption-side:top;text-align:left'><b>{html.escape(self.slug)}"
                   f"</b> &middot; scale <code>{html.escape(self.scale)}</code> &middot; seed "
                   f"{self.seed} &middot; {html.escape(self.tally())}</caption>")
        return (f"<table class='iclr-lab-scorecard' style='font-size:0.92em;width:100%'>{caption}"
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(cells)}</tbody></table>")


#: status -> (background, text) colours of the badges; readable in light and dark themes.
_BADGES = {
    "pass": ("#1a7f37", "#ffffff"),
    "FAIL": ("#cf222e", "#ffffff"),
    "not reproduced": ("#6e7781", "#ffffff"),
    "holds anyway": ("#0969da", "#ffffff"),
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

