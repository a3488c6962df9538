"""The ccl_vrp chapter's fixed test set and the offline script that scores it.

Decoding the whole test set (24 variants x 100 instances, 8 symmetries x 20 starts each) with six
checkpoints, and solving it with PyVRP, takes about half an hour of CPU, far beyond a chapter's
budget, so this script does it once and ships the per-instance results as
``iclr_lab/routing/data/test_costs.csv``; the chapter re-decodes a sample live and checks that it
matches. ::

    python -m iclr_lab.routing.evaluate ship /work/_ccl_runs     # copy the trained runs in
    python -m iclr_lab.routing.evaluate score pyvrp --work W     # one column at a time (resumable)
    python -m iclr_lab.routing.evaluate score ccl_0 --work W
    python -m iclr_lab.routing.evaluate merge --work W           # write the CSV
    python -m iclr_lab.routing.evaluate flops                    # write the FLOP counts

The chapter's FLOP counts of one TSNR step (:func:`~iclr_lab.routing.model.tsnr_flops` on the
shipped seed-0 CCL policy's configuration, shared and per trajectory) cost a tenth of a CPU second to
count, but counting starts ``torch.utils.flop_counter``, whose first use imports ``torch._dynamo``
(over a CPU second), so they ship too, as ``iclr_lab/routing/data/tsnr_flops.csv`` (columns
``customers``, ``scheme``, ``flops``); the tests count a sample of them again.

Columns of the CSV: ``variant``, ``ood`` (mixed backhaul), ``instance`` (0..99); one cost column per
solver, ``pyvrp``, ``nn`` (nearest neighbour) and ``<model>_<seed>`` for the shipped policies; and
for every solver but PyVRP (whose solutions are checked inside
:func:`~iclr_lab.routing.solvers.pyvrp_solve`) ``ok_<solver>``, the independent checker's verdict
under the physical mixed-backhaul load rule (``mb_rule="profile"``), and ``okenv_<solver>``, its
verdict under the environment's looser rule (``mb_rule="env"``; it differs only on the
mixed-backhaul variants).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from iclr_lab.core.validation import check_choice, check_int
from iclr_lab.routing.instances import ID_VARIANTS, MB_VARIANTS

if TYPE_CHECKING:
    import pandas as pd

    from iclr_lab.routing.instances import VRPBatch

__all__ = ["COSTS_CSV", "FLOPS_CSV", "FLOPS_NODES", "SOLVERS", "TEST_SEED", "count_flops",
           "learning_curves", "load_costs", "load_flops", "main", "read_shipped_csv", "test_instances",
           "write_manifest"]

TEST_SEED = 1_000_000_007  # far from every training batch's seed (seed * 1_000_003 + step)
TEST_COUNT = 100
TEST_NODES = 20
PYVRP_ITERATIONS = 2000
COSTS_CSV = Path(__file__).with_name("data") / "test_costs.csv"
POLICIES = tuple(f"{m}_{s}" for m in ("ccl", "static") for s in (0, 1, 2))
FLOPS_CSV = COSTS_CSV.with_name("tsnr_flops.csv")
#: sha256, row count and columns of each shipped CSV (written with it, checked on every read).
MANIFEST = COSTS_CSV.with_name("manifest.json")
#: customer counts of the shipped FLOP counts (every scale's ``flops_nodes`` is among them)
FLOPS_NODES = (10, 20, 50, 100, 200)
#: the two schemes of :func:`~iclr_lab.routing.model.tsnr_flops`, ``shared=True`` first
FLOP_SCHEMES = ((True, "shared (TSNR)"), (False, "per trajectory"))
SOLVERS = ("pyvrp", "nn") + POLICIES


def test_instances(variant: str, count: int = TEST_COUNT) -> VRPBatch:
    """The chapter's test set for ``variant`` (its first ``count`` instances): instance ``i`` of the
    shipped CSV is ``test_instances(variant)[i]``.

    The 100 instances are always drawn together (a generator's stream depends on the batch size, so
    ``generate(..., batch=3)`` would not give the first three of them) with one seed for every variant,
    so the 24 variants share their 100 geometries (and demands, windows, limits) and differ only in
    which attributes they keep.
    """
    from iclr_lab.routing.instances import generate

    check_choice("variant", variant, ID_VARIANTS + MB_VARIANTS)
    count = check_int("count", count, 1, TEST_COUNT)
    return generate(variant, TEST_NODES, TEST_COUNT, seed=TEST_SEED)[:count]


test_instances.__test__ = False  # type: ignore[attr-defined]  # not a pytest test, whatever imports it


def write_manifest(path: str | Path) -> None:
    """Record a shipped CSV in ``data/manifest.json``: its sha256, row count and columns (what
    :func:`read_shipped_csv` checks)."""
    import pandas as pd

    from iclr_lab.core.provenance import sha256

    path = Path(path)
    table = pd.read_csv(path)
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    manifest[path.name] = {"sha256": sha256(path), "rows": len(table), "columns": list(table.columns)}
    MANIFEST.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")


def read_shipped_csv(path: str | pathlib.Path, remake: str) -> pd.DataFrame:
    """Read a shipped CSV after checking it against ``data/manifest.json``: the sha256, then the
    row count, the columns and that no cell is empty or NaN. Any mismatch raises
    :class:`~iclr_lab.core.provenance.ShippedFileError` naming the file."""
    import pandas as pd

    from iclr_lab.core.provenance import ShippedFileError, check_sha256

    path = Path(path)
    record = json.loads(MANIFEST.read_text()).get(path.name) if MANIFEST.exists() else None
    if record is None:
        raise ShippedFileError(f"{path}: not recorded in {MANIFEST}; {remake}")
    check_sha256(path, record["sha256"], remake=remake)
    table = pd.read_csv(path)
    if len(table) != record["rows"] or list(table.columns) != record["columns"]:
        raise ShippedFileError(f"{path}: {len(table)} rows and columns {list(table.columns)}, its "
                               f"record says {record['rows']} rows and {record['columns']}; {remake}")
    if table.isna().any().any():
        raise ShippedFileError(f"{path}: {int(table.isna().sum().sum())} empty or NaN cells; {remake}")
    return table


def load_costs() -> pd.DataFrame:
    """The shipped per-instance results (module docstring), checked against their record (sha256,
    2,400 rows, the columns, no NaN): a damaged file raises
    :class:`~iclr_lab.core.provenance.ShippedFileError` instead of being read."""
    if not COSTS_CSV.exists():
        raise FileNotFoundError(f"{COSTS_CSV} is missing; make it with python -m iclr_lab.routing.evaluate")
    return read_shipped_csv(COSTS_CSV, "remake it with python -m iclr_lab.routing.evaluate merge")


def count_flops(nodes: Sequence[int]) -> pd.DataFrame:
    """FLOPs of one TSNR step of the shipped seed-0 CCL policy's configuration, counted now: one row
    per customer count ``n`` (``n + 1`` nodes, ``n`` trajectories) and scheme, shared first."""
    import pandas as pd

    from iclr_lab.routing.model import tsnr_flops
    from iclr_lab.routing.train import load_policy

    cfg = load_policy("ccl", seed=0).config
    return pd.DataFrame([{"customers": n, "scheme": name, "flops": tsnr_flops(n + 1, n, cfg, shared=shared)}
                         for n in nodes for shared, name in FLOP_SCHEMES])


def load_flops(nodes: Sequence[int]) -> pd.DataFrame:
    """The shipped FLOP counts (module docstring) for the customer counts ``nodes``, in the row order
    of :func:`count_flops` (which they equal)."""

    if not FLOPS_CSV.exists():
        raise FileNotFoundError(f"{FLOPS_CSV} is missing; make it with "
                                "python -m iclr_lab.routing.evaluate flops")
    table = read_shipped_csv(FLOPS_CSV, "remake it with python -m iclr_lab.routing.evaluate flops")
    table = table.set_index(["customers", "scheme"])
    missing = sorted(set(nodes) - set(table.index.get_level_values("customers")))
    if missing:
        raise ValueError(f"nodes must be among the shipped customer counts {FLOPS_NODES}, got {missing}")
    keys = [(n, name) for n in nodes for _, name in FLOP_SCHEMES]
    return table.loc[keys].reset_index()


def learning_curves() -> pd.DataFrame:
    """Training curves of the shipped policies: columns ``model``, ``seed``, ``step``, ``cost`` (mean
    over the step's batch of the best of its starts, on fresh training instances) and ``cpu_s``."""
    import pandas as pd

    from iclr_lab.routing.train import SHIPPED_SEEDS, shipped_path

    frames = []
    for model in ("ccl", "static"):
        for seed in SHIPPED_SEEDS:
            meta = json.loads(shipped_path(model, seed).with_suffix(".json").read_text())
            h = meta["history"]
            frames.append(pd.DataFrame({"model": model, "seed": seed, "step": h["step"], "cost": h["cost"],
                                        "cpu_s": h["cpu_s"]}))
    return pd.concat(frames, ignore_index=True)


def _score(solver: str, work: Path) -> None:
    import pandas as pd
    import torch

    from iclr_lab.core.progress import progress
    from iclr_lab.routing.checker import check_solution
    from iclr_lab.routing.model import solve
    from iclr_lab.routing.solvers import nearest_neighbour, pyvrp_solve
    from iclr_lab.routing.train import load_policy

    torch.set_num_threads(1)
    out = work / f"{solver}.csv"
    done = pd.read_csv(out) if out.exists() else None
    rows = [] if done is None else done.to_dict("records")
    finished = set() if done is None else set(done["variant"])
    policy = None
    if solver in POLICIES:
        model, seed = solver.split("_")
        policy = load_policy(model, seed=int(seed))
    for variant in progress(ID_VARIANTS + MB_VARIANTS, desc=f"score {solver}"):
        if variant in finished:
            continue
        inst = test_instances(variant)
        if solver == "pyvrp":
            costs = [pyvrp_solve(inst[i], time_limit=600, iterations=PYVRP_ITERATIONS, seed=0)[0]
                     for i in range(inst.batch_size)]
            rows += [{"variant": variant, "instance": i, "cost": c} for i, c in enumerate(costs)]
        else:
            if solver == "nn":
                _, routes = nearest_neighbour(inst)
            else:
                assert policy is not None
                routes = solve(policy, inst, augment=8).routes
            for i, r in enumerate(routes):
                strict = check_solution(inst[i], r, mb_rule="profile")
                loose = check_solution(inst[i], r, mb_rule="env")
                rows.append({"variant": variant, "instance": i, "cost": strict.cost, "ok": strict.feasible,
                             "okenv": loose.feasible})
        pd.DataFrame(rows).to_csv(out, index=False)  # after each variant: the scoring is resumable


def _merge(work: Path) -> None:
    import pandas as pd

    base: pd.DataFrame | None = None
    for solver in SOLVERS:
        part = pd.read_csv(work / f"{solver}.csv")
        if len(part) != TEST_COUNT * len(ID_VARIANTS + MB_VARIANTS):
            raise ValueError(f"{solver}: {len(part)} rows, scoring is unfinished")
        part = part.rename(columns={"cost": solver, "ok": f"ok_{solver}", "okenv": f"okenv_{solver}"})
        base = part if base is None else base.merge(part, on=["variant", "instance"], validate="1:1")
    assert base is not None
    base.insert(1, "ood", base["variant"].isin(MB_VARIANTS))
    cost_cols = list(SOLVERS)
    ok_cols = [c for c in base.columns if c.startswith("ok")]
    base = base[["variant", "ood", "instance"] + cost_cols + ok_cols]
    COSTS_CSV.parent.mkdir(exist_ok=True)
    base.to_csv(COSTS_CSV, index=False, float_format="%.6f")
    write_manifest(COSTS_CSV)


def _ship(runs: Path) -> None:
    from iclr_lab.routing.train import shipped_path

    for model in ("ccl", "static"):
        for seed in (0, 1, 2):
            src = runs / f"{model}-{seed}"
            meta = json.loads((src / "config.json").read_text())
            if meta["step"] != meta["train"]["steps"]:
                raise ValueError(f"{src}: training stopped at step {meta['step']} of "
                                 f"{meta['train']['steps']}")

            dst = shipped_path(model, seed)
            dst.parent.mkdir(exist_ok=True)
            shutil.copyfile(src / "policy.pt", dst)
            shutil.copyfile(src / "config.json", dst.with_suffix(".json"))


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point (``python -m iclr_lab.routing.evaluate --help``)."""
    ap = argparse.ArgumentParser(prog="python -m iclr_lab.routing.evaluate",
                                 description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("ship", help="copy trained runs <runs>/<model>-<seed>/ into the package")
    sp.add_argument("runs", type=Path)
    sc = sub.add_parser("score", help="score one solver on the whole test set")
    sc.add_argument("solver", choices=SOLVERS)
    sc.add_argument("--work", type=Path, required=True)
    mg = sub.add_parser("merge", help="merge the scored solvers into the shipped CSV")
    mg.add_argument("--work", type=Path, required=True)
    sub.add_parser("flops", help="count the FLOPs of one TSNR step and write the shipped CSV")
    a = ap.parse_args(argv)
    if a.cmd == "ship":
        _ship(a.runs)
    elif a.cmd == "flops":
        count_flops(FLOPS_NODES).to_csv(FLOPS_CSV, index=False)
        write_manifest(FLOPS_CSV)
    elif a.cmd == "score":
        a.work.mkdir(parents=True, exist_ok=True)
        _score(a.solver, a.work)
    else:
        _merge(a.work)


if __name__ == "__main__":
    main()
