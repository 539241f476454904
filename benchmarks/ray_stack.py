"""Stack start and catalog wall time with the servers in Ray actors on a local cluster, next to without.

Side by side in one run: ``pytest --rollout-chaos scenarios`` without Ray, then with
``--rollout-chaos-ray=local:N`` (N ``ray start`` nodes on this machine), each in its own
subprocess as CI runs them. Reported: both wall times and their ratio, and both stack starts (the
first scenario's setup; with Ray that includes the cluster's nodes, the driver's connection and
one actor per server). Scenarios that need Ray skip in the run without it; the outcome counts of
both runs are in the details. Both run with ``ROLLOUT_CHAOS_TRAINERS_PYTHON`` (an interpreter with
Ray, CI's trainers venv) or this interpreter; skipped when neither imports Ray.
"""

from __future__ import annotations

from benchmarks._result import Number, Result
from benchmarks.catalog import Stack, ray_interpreter, run_catalog

NODES = 3


def run(*, nodes: int = NODES) -> Result:
    python, why = ray_interpreter()
    if python is None:
        return Result("ray_stack", skipped=why)
    modes = {"without ray": (), f"ray local:{nodes}": (f"--rollout-chaos-ray=local:{nodes}",)}
    walls: dict[str, float] = {}
    starts: dict[str, float] = {}
    details: dict[str, object] = {}
    for label, options in modes.items():
        stack = Stack(label, python=python, options=options)
        walls[label], starts[label], details[label] = run_catalog(stack)
    without, with_ray = modes
    return Result(
        "ray_stack",
        (
            Number(f"{without}: catalog wall time", walls[without], "s"),
            Number(f"{with_ray}: catalog wall time", walls[with_ray], "s"),
            Number("wall time ratio (ray / without)", walls[with_ray] / walls[without], "x"),
            Number(f"{without}: stack start", starts[without], "s"),
            Number(f"{with_ray}: stack start", starts[with_ray], "s"),
        ),
        details=details,
    )
