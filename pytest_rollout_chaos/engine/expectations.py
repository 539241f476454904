"""A scenario's ``expect:`` block compared with what the collector did; pure, one message per miss.

``raises: {type, match}`` needs the collector to raise an exception whose class (or any base
class) has that name, with a message matching the regular expression. ``rollouts:`` needs a
returned list and checks its conditions. A timed-out run meets neither: ``bounded`` judges it.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Sequence
from pathlib import Path

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.scenario.model import Expectation, Raises, RolloutConditions


def check_expectations(
    expect: Expectation,
    rollouts: Sequence[Rollout | None] | None,
    raised: BaseException | None,
    timed_out: bool,
) -> list[str]:
    """Every way the outcome misses ``expect``; empty when it meets it."""
    if timed_out:
        if expect.raises is not None or expect.rollouts is not None:
            return [f"an outcome within {expect.within_s:g}s; the collection was still running"]
        return []
    if expect.raises is not None:
        return _check_raises(expect.raises, rollouts, raised)
    if expect.rollouts is not None:
        if raised is not None:
            return [
                f"rollouts to come back, but the collector raised {type(raised).__name__}: {raised}"
                f"{raised_at(raised)}"
            ]
        return _check_rollouts(expect.rollouts, rollouts or [])
    return []


def raised_at(error: BaseException) -> str:
    """`` (at slime/ray/rollout.py:1254, in compute_metrics_from_samples)``: the innermost frame
    of the raise, its file's last three path parts; empty without a traceback."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    where = "/".join(Path(frame.filename).parts[-3:])
    return f" (at {where}:{frame.lineno}, in {frame.name})"


def exception_names(error: BaseException) -> list[str]:
    """The class names an expected ``type`` may match: the class and its bases, plain and dotted."""
    names = []
    for cls in type(error).__mro__:
        names += [cls.__name__, f"{cls.__module__}.{cls.__qualname__}"]
    return names


def _check_raises(
    expected: Raises, rollouts: Sequence[Rollout | None] | None, raised: BaseException | None
) -> list[str]:
    if raised is None:
        count = len(rollouts or [])
        return [f"the collector to raise {expected.type}, but it returned {count} rollouts"]
    failures = []
    if expected.type not in exception_names(raised):
        failures.append(f"an exception of type {expected.type}, got {type(raised).__name__}: {raised}")
    if expected.match is not None and re.search(expected.match, str(raised)) is None:
        failures.append(f"the error message to match {expected.match!r}, got {str(raised)!r}")
    return failures


def _check_rollouts(conditions: RolloutConditions, rollouts: Sequence[Rollout | None]) -> list[str]:
    present = [rollout for rollout in rollouts if rollout is not None]
    statuses = [rollout.status for rollout in present]
    aborted = sorted(rollout.row_index for rollout in present if rollout.status == "aborted")
    completed = statuses.count("completed")
    failures = []
    if conditions.all_completed and (completed != len(rollouts) or not rollouts):
        failures.append(
            f"every rollout completed; got {completed} completed of {len(rollouts)} "
            f"(aborted rows {aborted}, {len(rollouts) - len(present)} missing)"
        )
    if conditions.aborted_max is not None and len(aborted) > conditions.aborted_max:
        failures.append(
            f"at most {conditions.aborted_max} aborted rollouts; got {len(aborted)}: rows {aborted}"
        )
    if conditions.aborted_rows is not None and aborted != sorted(conditions.aborted_rows):
        failures.append(f"exactly rows {sorted(conditions.aborted_rows)} aborted; got rows {aborted}")
    if conditions.min_completed is not None and completed < conditions.min_completed:
        failures.append(f"at least {conditions.min_completed} completed rollouts; got {completed}")
    return failures
