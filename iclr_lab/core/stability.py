"""Stability across seed blocks: does a verdict hold at other seeds, and does its control fail there?

A chapter judges its claims at its own seeds (``seed, seed + 1, ...``, five for most chapters). A
verdict that flips at the next five seeds is not a reproduction. ``iclr-lab stability SLUG --blocks 8``
(:func:`measure`) reruns the chapter's ``reproduce`` at disjoint base seeds, one block of seeds each:
``0, n, 2n, ... (blocks - 1) n`` for a chapter that runs ``n`` seeds. It writes a table, one entry
per claim and block: the value and whether it passed, the control's value and whether it passed, and
the code version (:func:`iclr_lab.core.provenance.code_version`). The table ships with the package
(``iclr_lab/stability/SLUG.json``), so a book-scale :class:`~iclr_lab.core.report.Report` reads it
without running anything (:func:`attach`) and each claim shows "holds at k of 8".

A paper claim counts as *reproduced* only when the method holds at ``blocks - MISSES_ALLOWED`` or more
blocks and its control fails at as many. Block 0 is the book's own run (base seed 0), so the book
build checks that the table still agrees with the code: :func:`attach` lists every claim whose block-0
entry differs from the run (by more than a relative 1e-3, or in any verdict) in
:attr:`Report.stale <iclr_lab.core.report.Report.stale>`, and
:meth:`Report.check <iclr_lab.core.report.Report.check>` fails on it.

That comparison is made only on the kind of CPU that made the table (:func:`machine`: vendor, model
and vector extension). Another CPU rounds differently (MKL and oneDNN pick their kernels by vendor
and instruction set), and a few hundred training steps amplify that far past 1e-3: the same code
gave 0.845 on one machine and 0.645 on another for one of VRAdam's claims. On another CPU the
table's k of 8 is still shown, with :attr:`Report.stability_machine
<iclr_lab.core.report.Report.stability_machine>` naming the machine it was measured on, and the
scorecard says that block 0 was not compared.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iclr_lab.core.report import Report
from iclr_lab.core.validation import check_int

__all__ = ["BLOCKS", "DIRECTORY", "MISSES_ALLOWED", "attach", "load", "machine", "measure", "path", "write"]

#: Seed blocks of a stability table.
BLOCKS = 8
#: How many blocks a reproduced claim may miss (it must hold, and its control fail, at 7 of 8).
MISSES_ALLOWED = 1
#: Where the shipped tables live (package data).
DIRECTORY = Path(__file__).resolve().parent.parent / "stability"
#: Block 0 must equal the book's run to this relative tolerance, with identical verdicts. The
#: room is for another CPU's rounding, which a few hundred training steps can amplify well past
#: 1e-6; a change to a chapter's code moves its numbers, or its verdicts, by more.
_RTOL = 1e-3


def machine() -> str:
    """The kind of CPU this process runs on, as stability tables record it: vendor, model name and
    the widest vector extension (``"AuthenticAMD AMD EPYC 7B13 AVX2"``). Read from
    ``/proc/cpuinfo``, or from Python's ``platform`` module where there is none."""
    import platform

    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
            if key.strip() == "flags":
                break
    except OSError:
        pass
    flags = set(info.get("flags", "").split())
    isa = "AVX512" if "avx512f" in flags else "AVX2" if "avx2" in flags else (
        "AVX" if "avx" in flags else platform.machine() or "unknown")
    vendor = info.get("vendor_id", platform.system())
    model = info.get("model name", platform.processor() or platform.machine())
    return " ".join(part for part in (vendor, model, isa) if part)


def path(slug: str, directory: str | Path | None = None) -> Path:
    """The stability table of chapter ``slug``."""
    return Path(directory or DIRECTORY) / f"{slug}.json"


def load(slug: str, directory: str | Path | None = None) -> dict[str, Any] | None:
    """The shipped stability table of ``slug`` (``None`` if it has none)."""
    p = path(slug, directory)
    return json.loads(p.read_text()) if p.exists() else None


def _entry(report: Report, block: int) -> dict[str, dict[str, Any]]:
    out = {}
    for c in report.claims:
        out[c.name] = {"block": block, "seed": report.seed, "measured": _num(c.measured),
                       "passed": c.passed, "control_measured": _num(c.control_measured),
                       "control_passed": c.control_passed, "testable": not c.not_testable}
    return out


def _num(v: float) -> float | None:
    return None if math.isnan(v) else float(v)


def _block(slug: str, scale: str, seed: int, b: int, threads: int | None) -> tuple[
        dict[str, dict[str, Any]], int, float]:
    """One block, in a worker process: its entries, base seed and seconds."""
    from iclr_lab.core.registry import reproduce

    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    report = reproduce(slug, scale=scale, seed=seed)
    return _entry(report, b), report.seed, report.seconds


def measure(slug: str, blocks: int = BLOCKS, *, scale: str = "book", jobs: int = 1,
            on_block: Callable[[int, int, float], None] | None = None) -> dict[str, Any]:
    """Run chapter ``slug`` at ``blocks`` disjoint base seeds; return its stability table.

    Block 0 runs at base seed 0; its longest ``per_seed`` gives the stride ``n`` (the number of
    seeds the chapter runs), and block ``b`` runs at base seed ``b * n``. With ``jobs`` > 1 the
    blocks after the first run in that many worker processes at once, one torch thread each (the
    book's setting; the numbers are those of a serial run, which a test checks).
    ``on_block(b, base_seed, seconds)`` is called as each block finishes (for progress).
    """
    from iclr_lab.core.provenance import code_version
    from iclr_lab.core.registry import reproduce

    check_int("blocks", blocks, 2)
    jobs = check_int("jobs", jobs, 1)
    claims: dict[str, list[dict[str, Any]]] = {}
    report = reproduce(slug, scale=scale, seed=0)
    stride = max([len(c.per_seed) for c in report.claims] + [1])
    results = {0: (_entry(report, 0), report.seed, report.seconds)}
    if on_block:
        on_block(0, report.seed, report.seconds)
    rest = range(1, blocks)
    if jobs == 1:
        for b in rest:
            results[b] = _block(slug, scale, b * stride, b, None)
            if on_block:
                on_block(b, results[b][1], results[b][2])
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(_block, slug, scale, b * stride, b, 1): b for b in rest}
            for future in as_completed(futures):
                b = futures[future]
                results[b] = future.result()
                if on_block:
                    on_block(b, results[b][1], results[b][2])
    seeds = []
    for b in range(blocks):
        entries, seed, _ = results[b]
        seeds.append(seed)
        for name, e in entries.items():
            claims.setdefault(name, []).append(e)
    return {"slug": slug, "scale": scale, "blocks": blocks, "stride": stride, "seeds": seeds,
            "code_version": code_version(), "machine": machine(), "claims": claims}


def write(table: dict[str, Any], directory: str | Path | None = None) -> Path:
    """Write ``table`` (from :func:`measure`) as the chapter's stability table; return its path."""
    p = path(table["slug"], directory)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(table, indent=1) + "\n")
    return p


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=_RTOL, abs_tol=1e-12)


def attach(report: Report, directory: str | Path | None = None) -> Report:
    """Give each claim of a book-scale ``report`` its :class:`~iclr_lab.core.report.Stability`
    from the shipped table; list in ``report.stale`` the claims the table does not match.

    A claim is stale when the table lacks it, or, for a run at base seed 0 on the kind of CPU that
    made the table (:func:`machine`), when its block-0 value, verdict or control differs from the
    run's. A stale claim gets no stability. On another kind of CPU (or for a table that does not
    record one) block 0 is not compared, and ``report.stability_machine`` names the table's machine.
    """
    from dataclasses import replace

    from iclr_lab.core.report import Stability

    table = load(report.slug, directory)
    if table is None or table.get("scale") != report.scale:
        return report
    stale, claims = [], []
    here = table.get("machine") == machine()
    if not here:
        report.stability_machine = table.get("machine", "a machine the table does not record")
    for c in report.claims:
        entries = table["claims"].get(c.name)
        fresh = entries is not None and len(entries) == table["blocks"]
        if fresh and report.seed == 0 and here:
            e = entries[0]
            fresh = (_same(e["measured"], _num(c.measured)) and e["passed"] == c.passed
                     and _same(e["control_measured"], _num(c.control_measured))
                     and e["control_passed"] == c.control_passed)
        if not fresh:
            stale.append(c.name)
            claims.append(c)
            continue
        fails = (sum(e["control_passed"] is False for e in entries)
                 if c.control else None)
        values = {e["measured"] for e in entries}
        invariant = len(entries) > 1 and len(values) == 1 and None not in values
        # tables made before premises were recorded have no "testable": every block counts
        testable = sum(e.get("testable", True) for e in entries)
        claims.append(replace(c, stability=Stability(
            table["blocks"], sum(bool(e["passed"]) for e in entries), fails,
            seed_invariant=invariant,
            testable=None if testable == len(entries) and not c.not_testable else testable)))
    report.claims, report.stale = claims, stale
    return report
