"""``pytest_rollout_chaos.kit``: the reference collector's own pieces, public and documented."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rollout_chaos import kit
from pytest_rollout_chaos.collector import reference
from tests.collector._fake_gym import FakeGym, context
from tests.examples import _page

KIT_SECTION = "Reusing the reference collector's pieces"


def test_every_piece_is_documented_on_the_collector_page() -> None:
    section = _page.section(KIT_SECTION)
    named = [name for name in kit.__all__ if f"`{name}" in section or f"`await {name}" in section]
    undocumented = [name for name in kit.__all__ if name not in named]
    assert undocumented == [], f"docs/writing-a-collector.md, '## {KIT_SECTION}' does not name them"
    assert [name for name in kit.__all__ if not hasattr(kit, name)] == []


def test_the_pieces_are_the_ones_the_reference_collector_runs() -> None:
    runs = vars(reference)  # what the reference collector's module calls, by the names it calls
    readers = ("turns_from_result", "status_of", "reward_of", "bad_logprob", "prefix_mismatch")
    assert [name for name in readers if getattr(kit, name) is not getattr(runs["results"], name)] == []
    same = ["repair_turns", "SpliceError", "prompt_groups", "root_cause", "is_unreachable"]
    same += ["all_or_first_error", "ReferenceCollector"]
    assert [name for name in same if getattr(kit, name) is not runs[name]] == []
    assert kit.AgentProbes is runs["Probes"]


@pytest.mark.parametrize(
    ("details", "status"),
    [({"reason": "max_output_tokens"}, "truncated"), (None, "completed"), ({"reason": "other"}, "completed")],
)
def test_status_of_reads_the_truncation_signal(details: dict[str, str] | None, status: str) -> None:
    assert kit.status_of({"response": {"output": [], "incomplete_details": details}}) == status


def test_wait_for_policy_takes_the_context_alone() -> None:
    ctx = context(FakeGym())  # no policy URL: nothing to wait for
    asyncio.run(kit.wait_for_policy(ctx))
    assert ctx.history.events() == []
