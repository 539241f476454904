"""Run every benchmark (or those named), print one table, and write the numbers as JSON with ``--json``.

    python -m benchmarks [--json PATH] [--only NAME ...] [--quick]

Each benchmark starts its own servers and stops them; they run one after another so they do
not compete for the CPU. Numbers are measured, never asserted: ratios are taken side by side
in one run, because shared machines are noisy. ``mutation`` (most of half an hour) runs only
when named in ``--only``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from benchmarks import (
    batched_validation,
    catalog,
    event_writer,
    fault_latency,
    gate,
    hops,
    mutation,
    overhead,
    policy_batching,
    ray_stack,
    stack_start,
    teardown,
    toxics,
)
from benchmarks._result import Result, table

BENCHMARKS: dict[str, Callable[[bool], Result]] = {
    "stack_start": lambda quick: stack_start.run(repeats=1 if quick else 3),
    "policy_batching": lambda quick: policy_batching.run(rounds=1 if quick else 2),
    "hops": lambda quick: hops.run(
        rounds=2 if quick else 8, small=30 if quick else 60, large=6 if quick else 12
    ),
    "overhead": lambda quick: overhead.run(rows=16 if quick else 32, rounds=2 if quick else 8),
    "event_writer": lambda quick: event_writer.run(
        events=5_000 if quick else 20_000, repeats=2 if quick else 3
    ),
    "fault_to_verdict": lambda quick: fault_latency.run(repeats=3 if quick else 10),
    "toxics": lambda quick: toxics.run(repeats=2 if quick else 5),
    "batched_validation": lambda quick: batched_validation.run(batch=64),
    "teardown": lambda quick: teardown.run(workers=(2,) if quick else (0, 2)),
    "catalog": lambda _quick: catalog.run(),
    "gate": lambda _quick: gate.run(),
    "ray_stack": lambda _quick: ray_stack.run(),
    "mutation": lambda quick: mutation.run(max_mutants=mutation.QUICK_MAX if quick else None),
}
# Run only when named in --only: the mutation score takes most of half an hour.
ONLY_WHEN_NAMED = frozenset({"mutation"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every number, goal and detail here")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted(BENCHMARKS),
        help=f"run only these ({', '.join(ONLY_WHEN_NAMED)}: only so)",
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run, noisier)")
    args = parser.parse_args(argv)
    results: list[Result] = []
    for name in args.only or [name for name in BENCHMARKS if name not in ONLY_WHEN_NAMED]:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        began = time.perf_counter()
        try:
            result = BENCHMARKS[name](args.quick)
        except Exception as error:
            traceback.print_exc()
            result = Result(name, skipped=f"failed: {type(error).__name__}: {error}"[:300])
        print(f"  {name} took {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
        results.append(result)
    print(table(results))
    if args.json is not None:
        document = {
            "python": sys.version.split()[0],
            "machine": platform.machine(),
            "cpus": _cpus(),
            "results": [result.to_json() for result in results],
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 1 if any(result.skipped and result.skipped.startswith("failed") for result in results) else 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    raise SystemExit(main())
