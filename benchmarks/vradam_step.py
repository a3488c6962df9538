"""Time ``VRAdam.step`` against ``torch.optim.AdamW(foreach=True).step`` on one CPU thread.

Usage: ``python benchmarks/vradam_step.py [--repeats 3] [--steps 200] [--sizes 1M,10M]``.

Two models (``1M``: 4 x Linear(512, 512) + a 10-way head, 1.06M parameters; ``10M``: 10 x
Linear(1024, 1024) + head, 10.5M parameters), each under two malloc settings: glibc's default, and
glibc pinned (``MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296``) so that large
temporaries are recycled instead of being page-faulted in again at every step. Gradients are random
but fixed, so only the optimizer step is timed.

One run is one fresh process (started by this script with the allocator's environment) in which
AdamW and one VRAdam variant step side by side, alternately (the order flips every step). Its ratio
is the median, over steps (the first 10% dropped), of the variant's step time over AdamW's
adjacent one, which cancels load that drifts on the timescale of a step pair. Step time is the
thread's CPU time (``time.thread_time``: it includes page faults, and excludes the time the thread
waits for a core on a shared machine); the wall-clock ratio is printed too. Every (model,
allocator, variant) cell runs ``--repeats`` times; the tables show the median ratio and the range.

Targets (issue 6): VRAdam with the velocity gate <= 1.15 x AdamW(foreach=True), and with
``normgrad=True`` <= 1.05 x, at both sizes and under both allocators. ``VRAdam(beta3=0)`` (the gate
switched off, P_t still computed) and ``VRAdam(foreach=False)`` (AdamW's own for-loop step after a
separate pass for P_t) are shown for reference.

The floor (issue 19): ``AdamW + dots(m)`` and ``AdamW + dots(g)`` are AdamW(foreach=True)'s step
followed by the extra reductions alone, exactly as VRAdam computes them (``torch.dot`` of every
chunk of the new first moment, or of the gradient, summed in float64 into one Python float). Their
ratio is the cost of AdamW plus the reductions and nothing else; a target below it cannot be met by
any implementation that computes ``P_t`` as a separate reduction. (Inside VRAdam's blocked step the
dot reads a block that is still in cache, so it can cost less than this standalone floor.)

``--write PATH`` saves the table as a Python module (``iclr_lab/optimizers/vradam/step_cost.py``,
which the chapter glues from).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PINNED = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "4294967296"}
ALLOCATORS = ("default", "pinned")
SIZES = {"1M": (512, 4), "10M": (1024, 10)}
BASELINE = "AdamW(foreach=True)"
#: name -> VRAdam keyword arguments (lr and weight decay as for the baseline).
VARIANTS = {
    "VRAdam()": {},
    "VRAdam(normgrad=True)": {"normgrad": True},
    "VRAdam(beta3=0)": {"beta3": 0.0},
    "VRAdam(foreach=False)": {"foreach": False},
}
TARGETS = {"VRAdam()": 1.15, "VRAdam(normgrad=True)": 1.05}
#: the floors: AdamW's step plus the extra reduction alone (see the module docstring)
FLOORS = {"AdamW + dots(m)": "exp_avg", "AdamW + dots(g)": "grad"}
#: which floor each target sits on
FLOOR_OF = {"VRAdam()": "AdamW + dots(m)", "VRAdam(normgrad=True)": "AdamW + dots(g)"}


def _child(size: str, variant: str, steps: int) -> dict[str, float]:
    """One run in this process: AdamW and ``variant`` side by side; median times and paired ratio."""
    import torch

    from iclr_lab.optimizers import VRAdam

    torch.set_num_threads(1)
    width, depth = SIZES[size]

    def model() -> torch.nn.Module:
        torch.manual_seed(0)
        layers: list[torch.nn.Module] = []
        for _ in range(depth):
            layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
        layers.append(torch.nn.Linear(width, 10))
        return torch.nn.Sequential(*layers)

    from iclr_lab.optimizers.vradam.optimizer import _CPU_CHUNK, _chunks, _total

    names = [BASELINE, variant]
    nets = {name: model() for name in names}
    gen = torch.Generator().manual_seed(1)
    grads = [torch.randn(p.shape, generator=gen) * 1e-2 for p in nets[BASELINE].parameters()]

    def adamw(name: str) -> torch.optim.Optimizer:
        return torch.optim.AdamW(nets[name].parameters(), lr=1e-3, weight_decay=1e-2, foreach=True)

    opts: dict[str, torch.optim.Optimizer] = {BASELINE: adamw(BASELINE)}
    if variant in FLOORS:
        inner, what = adamw(variant), FLOORS[variant]

        class _Floor:
            """AdamW's step, then VRAdam's reductions alone (``P_t`` as a float)."""

            @torch.no_grad()
            def step(self) -> None:
                inner.step()
                tensors = [inner.state[p]["exp_avg"] if what == "exp_avg" else p.grad
                           for g in inner.param_groups for p in g["params"]]
                _total([torch.dot(x, x) for t in tensors for x in _chunks(t, _CPU_CHUNK)])

        opts[variant] = _Floor()  # type: ignore[assignment]
    else:
        opts[variant] = VRAdam(nets[variant].parameters(), lr=1e-3, weight_decay=1e-2,
                               **VARIANTS[variant])
    for name in names:  # gradients stay attached: the optimizers only read them
        for p, g in zip(nets[name].parameters(), grads, strict=True):
            p.grad = g
    cpu: dict[str, list[float]] = {name: [] for name in names}
    wall: dict[str, list[float]] = {name: [] for name in names}
    for i in range(steps):
        for name in names if i % 2 == 0 else names[::-1]:
            c0, w0 = time.thread_time(), time.perf_counter()
            opts[name].step()
            cpu[name].append(time.thread_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    keep = slice(steps // 10, None)

    def paired(times: dict[str, list[float]]) -> float:
        pairs = zip(times[variant][keep], times[BASELINE][keep], strict=True)
        return statistics.median(v / b for v, b in pairs)

    return {"baseline_s": statistics.median(cpu[BASELINE][keep]), "ratio": paired(cpu),
            "wall_ratio": paired(wall)}


def _run(size: str, allocator: str, variant: str, steps: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in PINNED}
    if allocator == "pinned":
        env.update(PINNED)
    cmd = [sys.executable, __file__, "--child", size, "--variant", variant, "--steps", str(steps)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=240, help="steps at 1M (10M runs a quarter as many)")
    ap.add_argument("--sizes", default="1M,10M")
    ap.add_argument("--variants", default=",".join([*VARIANTS, *FLOORS]),
                    help="comma-separated names")
    ap.add_argument("--write", help="save the table as a Python module at this path")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.variant, args.steps)))
        return
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS) - set(FLOORS))
    if unknown:
        ap.error(f"unknown variants {unknown}; choose from {[*VARIANTS, *FLOORS]}")
    print(f"one thread; each cell: {args.repeats} runs, each a fresh process stepping {BASELINE} and "
          f"the variant alternately; ratio = median over steps of variant / {BASELINE} step time; "
          "cell = median ratio over runs (min-max)")
    results: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    for size in args.sizes.split(","):
        steps = args.steps if size == "1M" else max(args.steps // 4, 20)
        for allocator in ALLOCATORS:
            for variant in variants:
                results[size, allocator, variant] = [_run(size, allocator, variant, steps)
                                                     for _ in range(args.repeats)]
    worst = {name: 0.0 for name in [*TARGETS, *FLOORS] if name in variants}
    table: dict[str, dict[str, float]] = {}
    for key, title in (("ratio", "thread CPU time"), ("wall_ratio", "wall-clock time")):
        print(f"\n{title}")
        header = "".join(f" {v:>23s}" for v in variants)
        print(f"{'model':6s} {'allocator':9s} {BASELINE + ' ms':>24s}{header}")
        for size in args.sizes.split(","):
            for allocator in ALLOCATORS:
                runs = [r for v in variants for r in results[size, allocator, v]]
                cells = []
                for variant in variants:
                    ratios = [r[key] for r in results[size, allocator, variant]]
                    med = statistics.median(ratios)
                    if key == "ratio" and variant in worst:
                        worst[variant] = max(worst[variant], med)
                    if key == "ratio":
                        table[f"{size} {allocator} {variant}"] = {
                            "ratio": med, "low": min(ratios), "high": max(ratios)}
                    cells.append(f"{med:.3f} ({min(ratios):.2f}-{max(ratios):.2f})")
                base = statistics.median(r["baseline_s"] for r in runs) * 1e3
                print(f"{size:6s} {allocator:9s} {base:24.2f}" + "".join(f" {c:>23s}" for c in cells))
    print()
    for name, value in worst.items():
        if name not in TARGETS:
            continue
        verdict = "meets" if value <= TARGETS[name] else "MISSES"
        floor = FLOOR_OF[name]
        note = ""
        if floor in worst:
            below = worst[floor] > TARGETS[name]
            note = (f"; floor ({floor}) worst cell {worst[floor]:.3f}"
                    + (": the target is below the floor" if below else ""))
        print(f"{name}: worst cell (CPU time) {value:.3f}, target <= {TARGETS[name]}: {verdict}{note}")
    if args.write:
        _write(args.write, table, worst, args)


def _write(path: str, table: dict[str, dict[str, float]], worst: dict[str, float],
           args: argparse.Namespace) -> None:
    """Save the CPU-time table as a Python module (package data that every install carries)."""
    import platform

    text = (f'''"""VRAdam's step cost against AdamW(foreach=True), measured by ``benchmarks/vradam_step.py``.

Generated by ``python benchmarks/vradam_step.py --write PATH`` (do not edit by hand) on
{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, one thread; {args.repeats} run(s)
per cell of {args.steps} steps at 1M. Ratios: thread CPU time of the step over AdamW's, median over
runs (and their range).
"""

from __future__ import annotations

__all__ = ["FLOOR_OF", "STEP_COST", "TARGETS", "WORST"]

#: the median ratio and its range over runs, per model, allocator and variant
STEP_COST: dict[str, dict[str, float]] = {json.dumps(table, indent=4)}
#: worst cell over models and allocators, per variant
WORST: dict[str, float] = {json.dumps(worst, indent=4)}
#: the targets (issue 6)
TARGETS: dict[str, float] = {json.dumps(TARGETS)}
#: the floor each target sits on
FLOOR_OF: dict[str, str] = {json.dumps(FLOOR_OF)}
''')
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
