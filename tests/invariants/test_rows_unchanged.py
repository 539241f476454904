"""``rows_unchanged``: the caller's rows after ``collect`` against the copy taken before it."""

from __future__ import annotations

import dataclasses

from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.rows_unchanged import RowsUnchanged
from tests.invariants._builders import all_ok, observe, rows

CHECK = RowsUnchanged()


def test_rows_left_as_they_were_pass_and_rows_not_kept_are_not_judged() -> None:
    kept = dataclasses.replace(observe(3, all_ok(3)), rows_after=rows(3))
    assert CHECK.check(kept).status is Status.PASS
    assert CHECK.check(observe(3, all_ok(3))).status is Status.NOT_JUDGED


def test_a_nested_edit_a_merged_key_and_a_popped_key_each_fail_naming_where() -> None:
    after = rows(3)
    after[1]["responses_create_params"]["temperature"] = 0.0
    after[2]["reward"] = 1.0
    del after[0]["_rowidx"]
    verdict = CHECK.check(dataclasses.replace(observe(3, all_ok(3)), rows_after=after))
    assert verdict.status is Status.FAIL
    assert list(verdict.evidence) == [
        "rows[0]._rowidx: removed (was 0)",
        "rows[1].responses_create_params.temperature: added (0.0)",
        "rows[2].reward: added (1.0)",
    ]
    assert "changed the caller's rows in 3 place(s): rows[0]._rowidx: removed" in verdict.summary


def test_a_raise_does_not_excuse_a_change_nor_a_list_that_lost_rows() -> None:
    after = rows(2)
    after[0]["responses_create_params"]["input"][0]["content"] = "rewritten"
    raised = dataclasses.replace(observe(2, None, raised=RuntimeError("boom")), rows_after=after)
    verdict = CHECK.check(raised)
    assert verdict.status is Status.FAIL
    assert list(verdict.evidence) == ["rows[0].responses_create_params.input[0].content: 'q0' -> 'rewritten'"]
    shorter = dataclasses.replace(observe(2, all_ok(2)), rows_after=rows(1))
    assert list(CHECK.check(shorter).evidence) == ["the list of rows: 2 handed over, 1 after collect"]
