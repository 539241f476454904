"""Drawn variants of a scenario: the same draw everywhere, only edits the format accepts, the layout
left alone where rows are named by id, now and then more collections drawn apart from the rest,
shrinking one edit at a time, and a file that reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos.scenario import parse_scenario
from pytest_rollout_chaos.scenario.draw import (
    COLLECTIONS_PATH,
    SEED_PATH,
    Draw,
    DrawError,
    document,
    draw,
    smaller,
)
from pytest_rollout_chaos.scenario.model import Scenario, load_scenario

CATALOG = Path(__file__).resolve().parents[2] / "scenarios"
SCENARIOS = sorted(CATALOG.glob("*.chaos.yaml"))


def _draws(path: Path, count: int = 8) -> tuple[Scenario, str, list[Draw]]:
    scenario, text = load_scenario(path), path.read_text(encoding="utf-8")
    return scenario, text, [draw(scenario, text, seed=0, index=index) for index in range(1, count + 1)]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda path: path.name.removesuffix(".chaos.yaml"))
def test_every_catalog_scenario_draws_valid_variants_that_keep_what_it_expects(path: Path) -> None:
    scenario, _, made = _draws(path)
    for one in made:
        paths = [edit for edit, _ in one.edits]
        assert paths[0] == SEED_PATH, one.edits
        assert len(paths) >= 2, one.edits  # the seed and at least one more
        assert one.scenario.name == f"{scenario.name}-fuzz-{one.index}"
        assert one.scenario.expect == scenario.expect  # what it expects is never drawn
        workload = one.scenario.workload
        original = scenario.workload
        # a group size is drawn only where the scenario has groups, and never to one
        assert (workload.generations_per_prompt > 1) is (original.generations_per_prompt > 1)
        rows = workload.rows_per_task * len(workload.tasks) * workload.generations_per_prompt
        before = original.rows_per_task * len(original.tasks) * original.generations_per_prompt
        assert before <= rows <= max(24, before)  # every row the scenario names still exists
        aborted = scenario.expect.rollouts.aborted_rows if scenario.expect.rollouts else None
        if aborted:  # a group with no expected abort still trains, so the rollouts can come back
            size = workload.generations_per_prompt
            assert len({row // size for row in aborted}) < rows // size, one.edits
        # a next step or two, only where the scenario runs one collection
        assert workload.collections in ({1, 2, 3} if original.collections == 1 else {original.collections})
        assert one.scenario.stack.policy.seed is not None


def test_the_same_seed_and_index_draw_the_same_variant_and_another_seed_another() -> None:
    path = CATALOG / "baseline.chaos.yaml"
    scenario, text = load_scenario(path), path.read_text(encoding="utf-8")
    first = draw(scenario, text, seed=3, index=2)
    assert draw(scenario, text, seed=3, index=2).edits == first.edits
    others = {draw(scenario, text, seed=seed, index=2).edits for seed in range(4, 12)}
    assert first.edits not in others or len(others) > 1


def test_the_layout_is_not_drawn_where_a_fault_names_a_row() -> None:
    path = CATALOG / "nan-logprobs-nan.chaos.yaml"
    scenario, _, made = _draws(path, count=20)
    assert any("row" in step.params for step in scenario.faults)
    for one in made:
        assert one.scenario.workload.order == scenario.workload.order
        assert one.scenario.workload.row_ids == scenario.workload.row_ids


def test_a_second_task_goes_last_where_rows_are_named_so_a_named_row_keeps_its_task() -> None:
    path = CATALOG / "native-row-failures.chaos.yaml"  # row 3 must stay a multi-turn calculator row
    scenario, _, made = _draws(path, count=40)
    drawn = [
        one.scenario.workload.tasks for one in made if one.scenario.workload.tasks != scenario.workload.tasks
    ]
    assert drawn, "no draw added a task"
    for tasks in drawn:
        assert list(tasks[: len(scenario.workload.tasks)]) == list(scenario.workload.tasks), tasks


def test_a_scenario_with_nothing_to_vary_says_so() -> None:
    text = """
name: fixed
description: every dimension already at its end
stack: {env_latency_ms_per_call: 5}
workload: {rows_per_task: 24, tasks: [calculator, echo], max_concurrency: 8}
faults:
  - {kind: nan_logprobs, target: agent, row: 1}
expect: {invariants: [accounted]}
"""
    with pytest.raises(DrawError, match="nothing in this scenario can be varied"):
        draw(parse_scenario(text, Path("fixed.chaos.yaml")), text, seed=0, index=1)


def test_smaller_draws_undo_one_edit_each_and_keep_the_seed() -> None:
    path = CATALOG / "model-link-blackhole.chaos.yaml"
    _, text, made = _draws(path, count=12)
    widest = max(made, key=lambda one: len(one.edits))
    assert len(widest.edits) >= 3, widest.edits
    shrunk = list(smaller(widest, text))
    assert len(shrunk) == len(widest.edits) - 1
    for one in shrunk:
        assert one.edits[0] == widest.edits[0]  # the seed stays
        kept = [path for path, _ in one.edits]
        assert len([path for path, _ in widest.edits if path not in kept]) == 1
        assert one.scenario.name == widest.scenario.name


def test_a_draw_written_out_reads_back_as_the_same_scenario(tmp_path: Path) -> None:
    path = CATALOG / "one-row-hangs.chaos.yaml"
    _, _, made = _draws(path, count=1)
    written = tmp_path / f"{made[0].name}.chaos.yaml"
    written.write_text(document(made[0], source=Path("scenarios/one-row-hangs.chaos.yaml"), seed=0))
    again = load_scenario(written)
    assert again.workload == made[0].scenario.workload
    assert again.stack == made[0].scenario.stack
    assert again.faults == made[0].scenario.faults
    header = written.read_text().splitlines()
    assert header[0].startswith("# Drawn by --rollout-chaos-fuzz from scenarios/one-row-hangs.chaos.yaml")
    assert any(SEED_PATH in line for line in header[1:4])


def test_a_grouped_scenario_draws_other_group_sizes_and_a_reward_spread_and_shrinks_them_whole() -> None:
    """Groups of 2 under a group fault, members scored apart: what a group filter that counts members
    wrongly, or drops sound groups, needs to show. Undoing the size undoes the rows drawn for it."""
    _, text, made = _draws(CATALOG / "group-nan-logprobs.chaos.yaml", count=24)
    sizes = {one.scenario.workload.generations_per_prompt for one in made}
    assert 2 in sizes, sizes
    assert len(sizes) >= 3, sizes
    assert any(one.scenario.stack.reward_spread == 0.25 for one in made)
    pair = next(one for one in made if one.scenario.workload.generations_per_prompt == 2)
    assert ("workload.rows_per_task", 2) in pair.edits  # 2 prompts of 2 keep rows 0..7
    undone = [d for d in smaller(pair, text) if d.scenario.workload.generations_per_prompt == 4]
    assert [d.scenario.workload.rows_per_task for d in undone] == [1]


def test_no_group_size_is_drawn_that_leaves_every_group_with_an_expected_abort() -> None:
    """``run-answers-unreadable`` expects rows 1, 3 and 6 aborted in four groups of two over two
    tasks: at groups of four (eight rows) both groups would hold one, nothing would be left to
    train on and a sound collector must raise, against its ``expect.rollouts``."""
    _, _, made = _draws(CATALOG / "run-answers-unreadable.chaos.yaml", count=40)
    sizes = {one.scenario.workload.generations_per_prompt for one in made}
    assert 4 not in sizes, sizes
    assert sizes & {3, 5}, sizes  # other sizes are still drawn


def test_now_and_then_a_draw_runs_two_or_three_collections_and_shrinks_back_to_one() -> None:
    """Most draws keep the scenario's one collection; the others add a next step or two, last, and
    undoing that edit goes back to one."""
    _, text, made = _draws(CATALOG / "baseline.chaos.yaml", count=40)
    more = [one for one in made if one.scenario.workload.collections > 1]
    assert 0 < len(more) < len(made) / 2, [one.edits for one in more]
    assert {one.scenario.workload.collections for one in more} == {2, 3}
    for one in more:
        assert one.edits[-1] == (COLLECTIONS_PATH, one.scenario.workload.collections)
        undone = [d for d in smaller(one, text) if COLLECTIONS_PATH not in dict(d.edits)]
        assert [d.scenario.workload.collections for d in undone] == [1]


def test_the_collections_are_drawn_apart_so_every_other_edit_is_drawn_as_without_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario, text, made = _draws(CATALOG / "one-row-hangs.chaos.yaml", count=40)
    assert any(COLLECTIONS_PATH in dict(one.edits) for one in made)
    monkeypatch.setattr("pytest_rollout_chaos.scenario.draw.MORE_COLLECTIONS_CHANCE", 0.0)
    without = [draw(scenario, text, seed=0, index=one.index) for one in made]
    kept = [[edit for edit in one.edits if edit[0] != COLLECTIONS_PATH] for one in made]
    assert kept == [list(one.edits) for one in without]


def test_no_collections_are_drawn_where_the_scenario_runs_more_or_the_format_refuses_them() -> None:
    _, _, made = _draws(CATALOG / "next-step-after-failed-rows.chaos.yaml", count=40)
    assert {one.scenario.workload.collections for one in made} == {2}  # its own, left alone
    text = """
name: stays-down
description: a server left down after the heal, so no next step can run
workload: {rows_per_task: 4, tasks: [calculator, echo]}
faults:
  - {kind: kill, target: echo_agent, restart_on_heal: false}
expect: {invariants: [outage_fails_collection]}
"""
    scenario = parse_scenario(text, Path("stays-down.chaos.yaml"))
    drawn = [draw(scenario, text, seed=0, index=index) for index in range(1, 41)]
    assert {one.scenario.workload.collections for one in drawn} == {1}
