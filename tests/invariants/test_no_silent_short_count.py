"""``no_silent_short_count`` on hand-built outcomes: rows missing from what came back are said, and a
raise after the Gym client yielded too few results names the short count."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.collector.protocol import ShortCountError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.no_silent_short_count import NoSilentShortCount
from tests.invariants._builders import all_ok, observe, rollout


def test_short_count_fails_when_rows_are_missing_silently() -> None:
    history = History()
    history.append("process", "info", "exit", {"server": "agent-0", "code": -9, "signal": "SIGKILL"})
    verdict = NoSilentShortCount().check(observe(4, [rollout(0), None, None, None], history=history))
    assert verdict.status is Status.FAIL
    assert "silent short count: 1 of 4 rows came back" in verdict.summary
    assert "rows [1, 2, 3] are silently missing" in verdict.summary
    assert any("exit" in line for line in verdict.evidence)


def test_short_count_passes_on_raise_and_on_full_batches() -> None:
    assert NoSilentShortCount().check(observe(2, None, raised=ShortCountError("x"))).status is Status.PASS
    assert NoSilentShortCount().check(observe(2, all_ok(2))).status is Status.PASS
    aborted = [rollout(0), rollout(1, "aborted", error="HTTP 500 from agent")]
    assert NoSilentShortCount().check(observe(2, aborted)).status is Status.PASS


def test_short_count_unknown_when_nothing_finished() -> None:
    assert NoSilentShortCount().check(observe(2, None)).status is Status.UNKNOWN


def _short_history(rows: int = 6, yielded: int = 4) -> History:
    history = History()
    history.append("collector", "info", "short_results", {"rows": rows, "yielded": yielded})
    return history


@pytest.mark.parametrize(
    "raised",
    [
        RuntimeError("NeMo Gym returned only 4 rollouts but 6 were requested"),  # NeMo RL PR #2394
        RuntimeError("NeMo-Gym rollout stream ended before all rows arrived; missing row indices [1, 5]"),
        ShortCountError("requested 6 results but the Gym client returned 4"),
        RuntimeError("nemo-gym did not return results for samples: [2, 3]"),  # verl's NeMo Gym recipe
    ],
)
def test_raising_after_a_short_count_must_name_it(raised: BaseException) -> None:
    assert (
        NoSilentShortCount().check(observe(6, None, raised=raised, history=_short_history())).status
        is Status.PASS
    )


def test_an_error_that_says_nothing_of_the_short_count_is_silent() -> None:
    """NeMo RL before #2394: the None slot a missing row left is indexed, and that is all it says."""
    raised = RuntimeError("rollout failed")
    raised.__cause__ = TypeError("'NoneType' object is not subscriptable")
    verdict = NoSilentShortCount().check(observe(6, None, raised=raised, history=_short_history()))
    assert verdict.status is Status.FAIL
    assert "yielded 4 results for 6 rows" in verdict.summary
    assert "'NoneType' object is not subscriptable" in verdict.summary
    listed_wrong = RuntimeError("batch [0, 1, 2, 3, 4] failed")  # a list, but not of the 2 missing rows
    assert NoSilentShortCount().check(
        observe(6, None, raised=listed_wrong, history=_short_history())
    ).status is (Status.FAIL)
    # without a short count in the History, raising is no short-count matter
    assert NoSilentShortCount().check(observe(6, None, raised=raised)).status is Status.PASS
