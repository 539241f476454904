"""The ``slime`` adapter drives slime's real ``generate_and_rm_group`` and tells its trees apart.

On slime before PR #2078 one raising trajectory takes the rollout step down, so
``trajectory-exception-isolated`` fails by ``isolated_failures``; at the PR's head it passes
(``test_gates`` runs that gate over the whole catalog). An adapter that repaired slime (caught the
group's exception itself) would make the base tree pass too: the fidelity test shows that it does,
so the gate is what catches such an adapter. The head tree's placeholder is checked to come back
as what it is, not unwrapped.

The fast tests read hand-made samples with no slime at all; the slow ones unpack the pinned trees
(``_slime_trees``) and run child pytest sessions on the full stack, skipping, with the reason,
where this interpreter cannot import slime's rollout or the trees are not there.
"""

from __future__ import annotations

import enum
import importlib.util
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos.collector.adapters import slime
from tests.adapters import _slime_trees as trees
from tests.adapters._trees import REPO
from tests.catalog._verdicts import run_catalog


# -- hand-made samples: what the adapter reads back --------------------------------------------------
class Status(enum.Enum):
    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass
class FakeSample:
    """The fields of ``slime.utils.types.Sample`` the adapter reads."""

    index: int
    tokens: list[int] = field(default_factory=list)
    response_length: int = 0
    loss_mask: list[int] | None = None
    rollout_log_probs: list[float] | None = None
    reward: Any = None
    status: Status = Status.COMPLETED
    metadata: dict[str, Any] = field(default_factory=dict)


def two_turns(index: int = 0, status: Status = Status.COMPLETED) -> FakeSample:
    """Prompt [1, 2]; the model writes [10, 11], a tool answers [20], the model writes [12]."""
    return FakeSample(
        index=index,
        tokens=[1, 2, 10, 11, 20, 12],
        response_length=4,
        loss_mask=[1, 1, 0, 1],
        rollout_log_probs=[-0.5, -0.25, 0.0, -1.0],
        reward=1.0,
        status=status,
    )


def test_each_run_of_loss_mask_one_is_a_turn_with_everything_before_it_as_its_prompt() -> None:
    turns = slime.turns_of(two_turns())
    assert [(t.prompt_token_ids, t.generation_token_ids, t.generation_log_probs) for t in turns] == [
        ([1, 2], [10, 11], [-0.5, -0.25]),
        ([1, 2, 10, 11, 20], [12], [-1.0]),
    ]


def test_no_loss_mask_means_the_whole_response_is_one_generation() -> None:
    sample = FakeSample(index=0, tokens=[1, 2, 3], response_length=1, rollout_log_probs=[-0.1])
    turns = slime.turns_of(sample)
    assert [(t.prompt_token_ids, t.generation_token_ids) for t in turns] == [([1, 2], [3])]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (Status.COMPLETED, "completed"),
        (Status.TRUNCATED, "truncated"),
        (Status.ABORTED, "aborted"),
        (Status.FAILED, "aborted"),
        (Status.PENDING, "aborted"),
    ],
)
def test_sample_status_maps_to_the_rollout_status(status: Status, expected: str) -> None:
    rollout = slime.read_back(two_turns(3, status), slime.CrashLog())
    assert (rollout.row_index, rollout.status, rollout.reward) == (3, expected, 1.0)
    assert (rollout.error is None) == (expected != "aborted")
    assert len(rollout.turns) == 2


def test_an_aborted_sample_carries_slimes_abort_reason() -> None:
    sample = two_turns(1, Status.ABORTED)
    sample.metadata["abort_reason"] = "wall_clock_timeout"
    assert slime.read_back(sample, slime.CrashLog()).error == "wall_clock_timeout"


def test_a_list_placeholder_is_an_aborted_row_naming_the_shape_and_slimes_logged_cause() -> None:
    """PR #2078's placeholder is not unwrapped: the row says what came back and why."""
    placeholder = FakeSample(
        index=2, tokens=[0, 0], response_length=1, loss_mask=[0], rollout_log_probs=[0.0], reward=0.0
    )
    placeholder.status = Status.ABORTED
    crashes = slime.CrashLog()
    crashes.records.append(
        _record("trajectory crashed, isolating idx=%s: %r", 12, RuntimeError("not this row"))
    )
    crashes.records.append(
        _record("trajectory crashed, isolating idx=%s: %r", 2, RuntimeError("tool parser crashed"))
    )
    rollout = slime.read_back([placeholder], crashes)
    assert (rollout.row_index, rollout.status, rollout.turns) == (2, "aborted", [])
    assert rollout.error is not None
    assert "1-element list[Sample]" in rollout.error
    assert "PR #2078" in rollout.error
    assert "idx=2: RuntimeError('tool parser crashed')" in rollout.error
    assert "not this row" not in rollout.error


def test_a_placeholder_slime_logged_nothing_about_says_so() -> None:
    placeholder = FakeSample(index=4, status=Status.ABORTED)
    error = slime.read_back([placeholder], slime.CrashLog()).error
    assert error is not None
    assert "slime logged no cause for it" in error


def _record(message: str, *args: object) -> Any:
    import logging

    return logging.LogRecord(slime.ROLLOUT_MODULE, logging.ERROR, __file__, 1, message, args, None)


def test_rows_group_by_prompt_in_the_workload_layout() -> None:
    rows = [{"q": q, "_rowidx": i} for i, q in enumerate(["a", "a", "b", "b", "c", "c"])]
    groups = slime.prompt_groups(rows)
    assert [[index for index, _ in group] for group in groups] == [[0, 1], [2, 3], [4, 5]]
    single = slime.prompt_groups([{"q": q, "_rowidx": i} for i, q in enumerate("abc")])
    assert [len(group) for group in single] == [1, 1, 1]


def test_uneven_groups_are_an_error_naming_the_sizes() -> None:
    with pytest.raises(ValueError, match=r"groups of sizes \[1, 2\]"):
        slime.prompt_groups([{"q": q, "_rowidx": i} for i, q in enumerate("aab")])


def test_stubs_only_what_cannot_be_imported_as_slime_builds_them(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in slime.STUBBED:
        monkeypatch.delitem(sys.modules, name, raising=False)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("sglang_router", "transformers") else real_find_spec(name, *a),
    )
    monkeypatch.setitem(sys.modules, "ray", sys.modules.get("ray") or object())  # "importable"
    try:
        stubbed = slime.install_stubs()
        assert stubbed == ["sglang_router", "transformers"]
        assert sys.modules["sglang_router"].__version__ == "0.2.3"
        transformers = sys.modules["transformers"]
        assert type(transformers.AutoTokenizer.from_pretrained("x")) is object
        with pytest.raises(OSError, match="stubbed"):
            transformers.AutoProcessor.from_pretrained("x")
    finally:
        for name in ("sglang_router", "transformers"):
            sys.modules.pop(name, None)


# -- the real trees on the full stack ----------------------------------------------------------------
@pytest.fixture(scope="module")
def slime_trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two pinned trees, unpacked; skip, saying why, when they or slime's imports are missing."""
    into = tmp_path_factory.mktemp("slime-trees")
    unpacked = {name: trees.unpack(name, into) for name in (trees.BASE, trees.HEAD)}
    reason = trees.cannot_import(unpacked[trees.BASE])
    if reason is not None:
        pytest.skip(f"slime's rollout does not import in this interpreter: {reason}")
    return unpacked


def upstream(tree: Path) -> list[str]:
    return [f"--rollout-chaos-upstream={tree}"]


@pytest.mark.slow
def test_an_adapter_that_repairs_slime_would_make_the_base_tree_look_fixed(
    tmp_path: Path, slime_trees: dict[str, Path]
) -> None:
    """Fidelity: catching the group's exception in the adapter hides the bug on the base tree, so
    the slime gate (``test_gates``: base red by isolated_failures) fails for any adapter that does so."""
    verdicts = run_catalog(
        tmp_path,
        target="tests.adapters._slime_trees:repairing_factory",
        scenarios=[trees.SCENARIO],
        stack_args=upstream(slime_trees[trees.BASE]),
    )[trees.SCENARIO]
    assert verdicts.passed, f"the repairing adapter should hide the bug:\n{verdicts.message}"


PLACEHOLDER_TEST = textwrap.dedent(
    """
    import pytest

    @pytest.mark.asyncio
    @pytest.mark.chaos_fault("trajectory_exception", "agent", row=2, message="tool parser crashed on row 2")
    async def test_placeholder(chaos_collector, chaos_gym):
        rollouts = await chaos_collector.collect(chaos_gym.rows("calculator", 4), mode="train")
        assert [(r.row_index, r.status) for r in rollouts] == [
            (0, "completed"), (1, "completed"), (2, "aborted"), (3, "completed")
        ]
        error = rollouts[2].error
        assert "1-element list[Sample]" in error, error
        assert "tool parser crashed on row 2" in error, error
        assert all(r.turns for r in rollouts if r.status == "completed")
    """
)


@pytest.mark.slow
def test_head_placeholder_comes_back_as_an_aborted_row_that_names_its_shape_and_cause(
    pytester: pytest.Pytester, slime_trees: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_placeholder=PLACEHOLDER_TEST)
    result = pytester.runpytest_subprocess(
        "--rollout-chaos",
        "--rollout-chaos-target=slime",
        *upstream(slime_trees[trees.HEAD]),
        "-p",
        "no:cacheprovider",
        timeout=300,
    )
    result.assert_outcomes(passed=1)
