"""Hypothesis strategies for fault schedules: valid ``FaultStep`` lists (kinds x targets x triggers x params).

Everything drawn comes from the same tables the validator uses (the fault registry's
parameters, the targets of each kind) and keeps within the bounds the workload sets
(``shape.Shape``: rows a target receives, ``/run`` requests an agent gets), so a drawn
schedule validates by construction; the property tests of the runner use these to search for
schedules that break a collector. Hypothesis comes with the ``[fuzz]`` extra.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from pytest_rollout_chaos import extras

try:
    from hypothesis import strategies as st
except ModuleNotFoundError as missing:
    if missing.name != extras.FUZZ.module:
        raise
    raise extras.MissingExtraError(extras.FUZZ, "pytest_rollout_chaos.scenario.strategies") from missing

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.registry import FaultParameterError
from pytest_rollout_chaos.scenario import params as p
from pytest_rollout_chaos.scenario import spec as s
from pytest_rollout_chaos.scenario import vocabulary as v
from pytest_rollout_chaos.scenario.model import FaultStep, Trigger
from pytest_rollout_chaos.scenario.shape import Shape

_DEFAULT_TASKS = (v.TASK_NAMES[0],)
_SPAN = 1000
# Request paths the stack's servers answer: a fault-layer ``route`` is a path (it starts with
# ``/``), which free text drawn for a string parameter is not, so the layer would refuse it.
_ROUTES = ("/run", "/v1/responses", "/v1/chat/completions", "/v1/completions", "/tokenize", "/v1/*")


def fault_schedules(
    *,
    kinds: Sequence[str] | None = None,
    min_steps: int = 1,
    max_steps: int = 3,
    total_rollouts: int = 4,
    tasks: Sequence[str] = _DEFAULT_TASKS,
) -> st.SearchStrategy[list[FaultStep]]:
    """Lists of fault steps valid for a workload of ``tasks`` returning ``total_rollouts`` rollouts."""
    step = fault_steps(kinds=kinds, total_rollouts=total_rollouts, tasks=tasks)
    return st.lists(step, min_size=min_steps, max_size=max_steps)


def fault_steps(
    *,
    kinds: Sequence[str] | None = None,
    total_rollouts: int = 4,
    tasks: Sequence[str] = _DEFAULT_TASKS,
) -> st.SearchStrategy[FaultStep]:
    """One valid fault step; ``kinds`` limits the fault kinds drawn (default: all).

    ``total_rollouts`` rows are spread evenly over ``tasks`` (a gym-style workload).
    """
    chosen = tuple(kinds) if kinds is not None else p.fault_kinds()
    unknown = sorted(set(chosen) - set(p.fault_kinds()))
    if unknown:
        raise ValueError(f"unknown fault kind(s) {unknown} (valid: {', '.join(p.fault_kinds())})")
    shape = Shape.for_rows(total_rollouts, tasks)
    return st.sampled_from(chosen).flatmap(lambda kind: _step_of(kind, shape))


def triggers(total_rollouts: int = 4) -> st.SearchStrategy[Trigger]:
    """Any trigger: start, after N completed (N within the workload), after T seconds, on a request."""
    return _triggers(Shape.for_rows(total_rollouts, _DEFAULT_TASKS))


def _triggers(shape: Shape) -> st.SearchStrategy[Trigger]:
    return st.one_of(
        st.just(Trigger()),
        st.integers(1, _total(shape)).map(lambda n: Trigger("after_completed", completed=n)),
        st.floats(0.0, 10.0, allow_nan=False).map(lambda t: Trigger("after_s", after_s=t)),
        st.sampled_from(v.SERVERS).flatmap(
            lambda server: st.integers(1, min(5, shape.runs_to(server) or 5)).map(
                lambda nth: Trigger("on_request", server=server, nth=nth)
            )
        ),
    )


def _step_of(kind: str, shape: Shape) -> st.SearchStrategy[FaultStep]:
    # An agent instance whose task is not in the workload receives no rows.
    targets = [target for target in v.targets_for(kind) if shape.rows_of(target)]
    return (
        st.sampled_from(targets)
        .flatmap(
            lambda target: st.builds(
                _make_step,
                kind=st.just(kind),
                target=st.just(target),
                at=_triggers(shape),
                duration_s=st.none() | st.floats(0.1, 30.0, allow_nan=False),
                params=_params_of(kind, target, shape),
            )
        )
        .filter(_buildable)
    )


def _total(shape: Shape) -> int:
    total = shape.total
    if total is None:
        raise ValueError(f"the workload of {shape} has no known size")
    return total


def _buildable(step: FaultStep) -> bool:
    """Rules between parameters (slicer's variation below its size) live in the fault classes."""
    try:
        registry.build(step.kind, {**step.params, "target": step.target})
    except FaultParameterError:
        return False
    return True


def _make_step(
    kind: str, target: str, at: Trigger, duration_s: float | None, params: dict[str, Any]
) -> FaultStep:
    return FaultStep(kind, target, at, duration_s, types.MappingProxyType(params))


def _params_of(kind: str, target: str, shape: Shape) -> st.SearchStrategy[dict[str, Any]]:
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, param in p.param_specs(kind).items():
        bounded = _within_workload(kind, name, target, shape)
        values = bounded if bounded is not None else values_of(param.spec)
        if param.nullable:
            values = st.none() | values
        (required if param.required else optional)[name] = values
    return st.fixed_dictionaries(required, optional=optional)


def _within_workload(kind: str, name: str, target: str, shape: Shape) -> st.SearchStrategy[Any] | None:
    """The values the workload allows for a parameter it bounds (``relations``); None for the rest."""
    if name == "row":
        rows = shape.rows_of(target) or range(_total(shape))
        return st.integers(rows.start, rows.stop - 1)
    if name == "route":
        return st.sampled_from(_ROUTES)
    runs = shape.runs_per_fault(target)
    if name == "nth" and runs:
        return st.integers(1, runs)
    if kind == "short_results" and name == "count":
        return st.integers(1, _total(shape))
    return None


def values_of(spec: s.Spec) -> st.SearchStrategy[Any]:
    """Values a spec accepts (for the scalar specs fault parameters use)."""
    if isinstance(spec, s.Choice):
        return st.sampled_from(spec.choices)
    if isinstance(spec, s.Boolean):
        return st.booleans()
    if isinstance(spec, s.Integer):
        low = spec.minimum if spec.minimum is not None else -_SPAN
        return st.integers(low, spec.maximum if spec.maximum is not None else low + _SPAN)
    if isinstance(spec, s.Number):
        bottom = spec.minimum if spec.minimum is not None else -float(_SPAN)
        top = spec.maximum if spec.maximum is not None else bottom + _SPAN
        return st.floats(bottom, top, allow_nan=False, exclude_min=spec.exclusive)
    if isinstance(spec, s.Text):
        alphabet = st.characters(min_codepoint=32, max_codepoint=126)
        return st.text(alphabet, min_size=0 if spec.allow_empty else 1, max_size=12).filter(
            lambda text: spec.allow_empty or bool(text.strip())
        )
    raise TypeError(f"no strategy for {spec!r}")


__all__ = ["fault_schedules", "fault_steps", "triggers", "values_of"]
