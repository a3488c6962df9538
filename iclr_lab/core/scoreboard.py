"""The book's scoreboard: every chapter's claims in one table, and how long each chapter took.

When the book is built, ``tools/build_book.py`` sets ``ICLR_LAB_SCOREBOARD_DIR``; each executed chapter
then writes its report there (:func:`record`, called by :func:`iclr_lab.core.book.glue_report`) and the
build adds the chapters' execution times. The page ``book/scoreboard.md`` reads them back
(:func:`collect`) instead of running every experiment a second time. ``iclr-lab reproduce --all``
builds the same table (:func:`table`) from reports it has just run.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iclr_lab.core.report import Claim, Report
from iclr_lab.core.validation import check_range

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

__all__ = ["ENV", "VERDICTS", "collect", "headlines", "record", "table", "times_chart"]

#: The environment variable that names the folder where executed chapters leave their reports.
ENV = "ICLR_LAB_SCOREBOARD_DIR"

#: The scoreboard's words for each status of :class:`~iclr_lab.core.report.Claim` (the build's
#: gate: whether a claim expected to hold did).
VERDICTS = {
    "pass": "pass",
    "FAIL": "FAIL",
    "did not reproduce": "did not reproduce at this scale",
    "pass (not expected)": "pass (not expected)",
}


def record(report: Report, directory: str | Path | None = None) -> Path | None:
    """Write ``report`` as JSON to ``directory`` (default: ``$ICLR_LAB_SCOREBOARD_DIR``, if set)."""
    target = directory if directory is not None else os.environ.get(ENV)
    if not target:
        return None
    path = Path(target) / f"{report.slug}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.to_json(indent=1))
    return path


def collect(directory: str | Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """The reports recorded in ``directory`` (as dicts, in book order) and the execution times
    (``times.json``: chapter source -> ``{"cpu": s, "wall": s}``; empty if absent)."""
    from iclr_lab.core.registry import chapters

    directory = Path(directory)
    order = {c.slug: i for i, c in enumerate(chapters())}
    reports = [json.loads(p.read_text()) for p in directory.glob("*.json") if p.name != "times.json"]
    reports.sort(key=lambda r: order.get(r["slug"], len(order)))
    times_path = directory / "times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    return reports, times


def _report(report: Report | Mapping[str, Any]) -> Report:
    if isinstance(report, Report):
        return report
    claims = [Claim.from_dict(c) for c in report["claims"]]
    return Report(str(report["slug"]), str(report["scale"]), int(report["seed"]), {}, claims)


def table(reports: Iterable[Report | Mapping[str, Any]]) -> pd.DataFrame:
    """One row per claim of every report: paper, claim, kind, the paper's number, the measured value
    (median [min-max] over seeds), the control's value, what was needed (and where that bound came
    from), the seed blocks where it held, the three-way verdict and the build's status."""
    import pandas as pd

    from iclr_lab.core.registry import chapter

    rows = []
    for report in reports:
        rep = _report(report)
        short = chapter(rep.slug).short
        for c in rep.ordered_claims():
            rows.append({"paper": short, "slug": rep.slug, "claim": c.name, "kind": c.kind,
                         "paper's number": c.paper, "measured": c.value_text,
                         "control": f"{c.control_text} ({c.control})" if c.control else "",
                         "needed": f"{c.bound} ({c.source})",
                         "seed blocks": c.stability.text if c.stability else "",
                         "verdict": rep.verdict_of(c), "status": VERDICTS[c.status]})
    columns = ["paper", "slug", "claim", "kind", "paper's number", "measured", "control", "needed",
               "seed blocks", "verdict", "status"]
    return pd.DataFrame(rows, columns=columns)


def headlines(reports: Iterable[Report | Mapping[str, Any]]) -> pd.DataFrame:
    """One row per chapter: its verdict line (the three-way count of its paper claims, or that the
    claims protocol is not applied yet, or that a smoke run judges nothing) and the other checks."""
    import pandas as pd

    from iclr_lab.core.registry import chapter

    rows = []
    for report in reports:
        rep = _report(report)
        rows.append({"paper": chapter(rep.slug).short, "slug": rep.slug, "scale": rep.scale,
                     "protocol": "yes" if rep.protocol else "not yet", "verdict": rep.tally()})
    return pd.DataFrame(rows, columns=["paper", "slug", "scale", "protocol", "verdict"])


def times_chart(times: Mapping[str, Mapping[str, float]], *, budget: float = 60.0,
                limit: float = 90.0) -> alt.LayerChart:
    """Each chapter's CPU time (its kernel's user + system time, one thread) against the budget
    (dashed) and the hard limit (seconds, 0 < budget <= limit); the wall time is in the tooltip."""
    budget = check_range("budget", budget, 0, math.inf, low_open=True)
    limit = check_range("limit", limit, budget, math.inf)
    import altair as alt
    import pandas as pd

    from iclr_lab.core.charts import reference_line

    df = pd.DataFrame({"chapter": [Path(k).stem for k in times],
                       "seconds": [float(t["cpu"]) for t in times.values()],
                       "wall": [float(t["wall"]) for t in times.values()]})
    df["within"] = df["seconds"].map(lambda s: "within budget" if s <= budget else
                                     ("over budget" if s <= limit else "over the limit"))
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X("seconds:Q", title="CPU time (s, one thread)",
                scale=alt.Scale(domain=[0, max(limit, float(df["seconds"].max()) * 1.05)])),
        y=alt.Y("chapter:N", sort="-x", title=None),
        color=alt.Color("within:N", title=None,
                        scale=alt.Scale(domain=["within budget", "over budget", "over the limit"],
                                        range=["#4c78a8", "#f58518", "#d62728"])),
        tooltip=["chapter", alt.Tooltip("seconds:Q", title="CPU s", format=".1f"),
                 alt.Tooltip("wall:Q", title="wall s", format=".1f")])
    layers = [bars, reference_line(budget, axis="x", label=f"budget {budget:g} s"),
              reference_line(limit, axis="x", label=f"limit {limit:g} s", color="#d62728")]
    return alt.LayerChart(layer=layers, width=440, height=max(60, 26 * len(df)),
                          title="Chapter CPU times in this build")
