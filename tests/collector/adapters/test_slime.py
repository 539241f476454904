"""The ``slime`` adapter drives slime's real ``generate_and_rm_group`` and ``RolloutManager`` to the
train data, and tells its trees apart.

On slime before PR #2078 one raising trajectory takes the rollout step down in
``generate_and_rm_group``, so ``trajectory-exception-isolated`` fails by ``isolated_failures``; at
the PR's head the step goes on, and slime's ``RolloutManager`` reads ``effective_response_length``
on the one-element list the placeholder is: the step raises there (``test_gates`` pins the gate
over the catalog). The adapter reads its rows from the train data on both trees; one broken on
purpose to stop at ``generate_and_rm_group`` again (``_slime_broken``) is caught by the verdicts
that differ; one that repaired slime (caught the group's exception itself) makes the base tree
look isolated, which the gate would read as a fix. On slime's main, which never merged the PR and
makes its samples with ``TrajectoryManager``, the step goes down as on the base tree, and drift
is realigned or forked by slime's own code.

The fast tests read hand-made samples with no slime at all; the slow ones unpack the pinned trees
(``_slime_trees``) and run child pytest sessions on the full stack, skipping, with the reason,
where this interpreter cannot import slime's rollout or the trees are not there.
"""

from __future__ import annotations

import enum
import importlib.util
import sys
import textwrap
from argparse import Namespace
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos.collector.adapters import slime, slime_imports, slime_train_data
from pytest_rollout_chaos.invariants.base import Status as Judged
from pytest_rollout_chaos.invariants.train_batch_sound import TrainBatchSound
from tests.catalog._verdicts import run_catalog
from tests.collector.adapters import _slime_trees as trees
from tests.collector.adapters._trees import REPO
from tests.invariants._builders import observe


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
    turns = slime_train_data.turns_of(two_turns())
    assert [(t.prompt_token_ids, t.generation_token_ids, t.generation_log_probs) for t in turns] == [
        ([1, 2], [10, 11], [-0.5, -0.25]),
        ([1, 2, 10, 11, 20], [12], [-1.0]),
    ]


def test_no_loss_mask_means_the_whole_response_is_one_generation() -> None:
    sample = FakeSample(index=0, tokens=[1, 2, 3], response_length=1, rollout_log_probs=[-0.1])
    turns = slime_train_data.turns_of(sample)
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
    rollout = slime_train_data.read_back(two_turns(3, status), slime_train_data.CrashLog())
    assert (rollout.row_index, rollout.status, rollout.reward) == (3, expected, 1.0)
    assert (rollout.error is None) == (expected != "aborted")
    assert len(rollout.turns) == 2


def test_an_aborted_sample_carries_slimes_abort_reason() -> None:
    sample = two_turns(1, Status.ABORTED)
    sample.metadata["abort_reason"] = "wall_clock_timeout"
    assert slime_train_data.read_back(sample, slime_train_data.CrashLog()).error == "wall_clock_timeout"


def test_a_list_placeholder_is_an_aborted_row_naming_the_shape_and_slimes_logged_cause() -> None:
    """PR #2078's placeholder is not unwrapped: the row says what came back and why."""
    placeholder = FakeSample(
        index=2, tokens=[0, 0], response_length=1, loss_mask=[0], rollout_log_probs=[0.0], reward=0.0
    )
    placeholder.status = Status.ABORTED
    crashes = slime_train_data.CrashLog()
    crashes.records.append(
        _record("trajectory crashed, isolating idx=%s: %r", 12, RuntimeError("not this row"))
    )
    crashes.records.append(
        _record("trajectory crashed, isolating idx=%s: %r", 2, RuntimeError("tool parser crashed"))
    )
    rollout = slime_train_data.read_back([placeholder], crashes)
    assert (rollout.row_index, rollout.status, rollout.turns) == (2, "aborted", [])
    assert rollout.error is not None
    assert "1-element list[Sample]" in rollout.error
    assert "PR #2078" in rollout.error
    assert "idx=2: RuntimeError('tool parser crashed')" in rollout.error
    assert "not this row" not in rollout.error


def test_a_placeholder_slime_logged_nothing_about_says_so() -> None:
    placeholder = FakeSample(index=4, status=Status.ABORTED)
    error = slime_train_data.read_back([placeholder], slime_train_data.CrashLog()).error
    assert error is not None
    assert "slime logged no cause for it" in error


def _record(message: str, *args: object) -> Any:
    import logging

    return logging.LogRecord(slime_imports.ROLLOUT_MODULE, logging.ERROR, __file__, 1, message, args, None)


def train_data(*samples: FakeSample) -> dict[str, Any]:
    """What ``_convert_samples_to_train_data`` hands on for ``samples``: the keys the adapter reads."""
    return {
        "tokens": [sample.tokens for sample in samples],
        "response_lengths": [sample.response_length for sample in samples],
        "loss_masks": [sample.loss_mask for sample in samples],
        "rollout_log_probs": [sample.rollout_log_probs for sample in samples],
        "rewards": [0.0 for _ in samples],  # the advantages: not the reward
        "raw_reward": [sample.reward for sample in samples],
        "truncated": [0 for _ in samples],
        "sample_indices": [sample.index for sample in samples],
    }


def test_rollouts_are_read_from_the_train_data_with_the_raw_reward_in_the_train_batch() -> None:
    first, second = two_turns(0), two_turns(1)
    data = train_data(first, second)
    data["raw_reward"] = [1.0, 0.5]
    data["truncated"] = [0, 1]
    data["loss_masks"][1] = [1, 0, 0, 0]  # slime's train data, not the sample, is what counts
    rollouts = slime_train_data.read_train_data(data, [[first], [second]], slime_train_data.CrashLog())
    assert [(r.row_index, r.status, r.reward, r.in_train_batch) for r in rollouts] == [
        (0, "completed", 1.0, True),
        (1, "truncated", 0.5, True),
    ]
    assert [len(r.turns) for r in rollouts] == [2, 1]
    assert [r.loss_mask for r in rollouts] == [[1, 1, 0, 1], [1, 0, 0, 0]]


def test_a_placeholder_in_the_train_data_is_an_aborted_sample_in_the_train_batch() -> None:
    """Every row of a batch crashed at PR #2078's head: slime flattens the lists away and trains on them."""
    placeholder = FakeSample(
        index=0, tokens=[0, 0], response_length=1, loss_mask=[0], rollout_log_probs=[0.0], reward=0.0
    )
    placeholder.status = Status.ABORTED
    (rollout,) = slime_train_data.read_train_data(
        train_data(placeholder), [[[placeholder]]], slime_train_data.CrashLog()
    )
    assert (rollout.row_index, rollout.status, rollout.reward, rollout.in_train_batch) == (
        0,
        "aborted",
        0.0,
        True,
    )
    assert rollout.error is not None
    assert "1-element list[Sample]" in rollout.error


@pytest.mark.parametrize("per_token_flag", [False, True])
def test_a_placeholder_carries_slimes_loss_mask_and_loss_reduction_to_train_batch_sound(
    per_token_flag: bool,
) -> None:
    """PR #2078's placeholder trains on loss mask ``[0]``, but slime's loss counts it in its divisor
    either way (the global batch size; or at least one token): the verdict names the setting."""
    placeholder = FakeSample(
        index=0, tokens=[0, 0], response_length=1, loss_mask=[0], rollout_log_probs=[0.0], reward=0.0
    )
    placeholder.status = Status.ABORTED
    reduction = slime_train_data.loss_reduction(Namespace(calculate_per_token_loss=per_token_flag))
    (rollout,) = slime_train_data.read_train_data(
        train_data(placeholder), [[[placeholder]]], slime_train_data.CrashLog(), reduction=reduction
    )
    assert (rollout.loss_mask, rollout.loss_reduction) == ([0], reduction)
    assert reduction.setting.startswith(f"--calculate-per-token-loss {'on' if per_token_flag else 'off'}")
    verdict = TrainBatchSound().check(observe(1, [rollout]))
    assert verdict.status is Judged.FAIL
    (problem,) = verdict.evidence
    assert f"{reduction.setting} counts it in the loss's divisor" in str(problem), problem
    assert "loss mask trains" not in str(problem), problem


def test_a_row_slime_left_out_of_the_train_data_is_aborted_out_of_the_batch() -> None:
    kept, dropped = two_turns(0), two_turns(1)
    rollouts = slime_train_data.read_train_data(
        train_data(kept), [[kept], [dropped]], slime_train_data.CrashLog()
    )
    assert [(r.row_index, r.status, r.in_train_batch) for r in rollouts] == [
        (0, "completed", True),
        (1, "aborted", False),
    ]
    assert rollouts[1].error == "slime left row 1 out of the train data"


def test_a_row_slime_trains_as_several_samples_is_one_rollout_with_their_turns() -> None:
    """On slime's ``TrajectoryManager`` trees the hook returns each row as a ``list[Sample]``, one per
    chain (a fork where a prompt drifted): the row is every one of them, not a placeholder."""
    first, fork, other = two_turns(0), two_turns(0), two_turns(1)
    fork.tokens, fork.response_length, fork.loss_mask, fork.rollout_log_probs = [7, 8, 9], 1, [1], [-2.0]
    data = train_data(first, fork, other)
    data["truncated"] = [0, 1, 0]
    rollouts = slime_train_data.read_train_data(
        data, [[[first, fork]], [[other]]], slime_train_data.CrashLog(), fan_out=True
    )
    assert [(r.row_index, r.status, r.error, r.in_train_batch) for r in rollouts] == [
        (0, "truncated", None, True),
        (1, "completed", None, True),
    ]
    assert [t.generation_token_ids for t in rollouts[0].turns] == [[10, 11], [12], [9]]
    assert rollouts[0].turns[2].prompt_token_ids == [7, 8]


def test_a_bool_reward_is_read_as_slime_trains_it() -> None:
    """slime makes its advantages of ``torch.tensor(raw_rewards, dtype=torch.float)``: True is 1.0."""
    sample = two_turns(0)
    data = train_data(sample)
    data["raw_reward"] = [True]
    (rollout,) = slime_train_data.read_train_data(data, [[sample]], slime_train_data.CrashLog())
    assert rollout.reward == 1.0
    sample.reward = False
    assert slime_train_data.read_back(sample, slime_train_data.CrashLog()).reward == 0.0


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
    missing = ("sglang_router", "transformers", "sglang")
    for name in (*slime_imports.STUBBED, *slime_imports.SGLANG_MODULES):
        monkeypatch.delitem(sys.modules, name, raising=False)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in missing else real_find_spec(name, *a),
    )
    monkeypatch.setitem(sys.modules, "ray", sys.modules.get("ray") or object())  # "importable"
    try:
        stubbed = slime_imports.install_stubs()
        assert stubbed == ["sglang_router", "transformers", *slime_imports.SGLANG_MODULES]
        assert sys.modules["sglang_router"].__version__ == "0.2.3"
        transformers = sys.modules["transformers"]
        assert type(transformers.AutoTokenizer.from_pretrained("x")) is object
        with pytest.raises(OSError, match="stubbed"):
            transformers.AutoProcessor.from_pretrained("x")
        assert sys.modules["sglang.srt.constants"].GPU_MEMORY_TYPE_KV_CACHE == "kv_cache"
        with pytest.raises(RuntimeError, match="sglang is stubbed"):
            sys.modules["sglang.srt.server_args"].ServerArgs()
        with pytest.raises(RuntimeError, match="sglang is stubbed"):
            sys.modules["sglang.srt.utils"].kill_process_tree(1)
    finally:
        for name in ("sglang_router", "transformers", *slime_imports.SGLANG_MODULES):
            sys.modules.pop(name, None)


# -- the real trees on the full stack ----------------------------------------------------------------
@pytest.fixture(scope="module")
def slime_trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three pinned trees, unpacked; skip, saying why, when they or slime's imports are missing."""
    into = tmp_path_factory.mktemp("slime-trees")
    unpacked = {name: trees.unpack(name, into) for name in (trees.BASE, trees.HEAD, trees.MAIN)}
    reason = trees.cannot_import(unpacked[trees.BASE])
    if reason is not None:
        pytest.skip(f"slime's rollout does not import in this interpreter: {reason}")
    return unpacked


def upstream(tree: Path) -> list[str]:
    return [f"--rollout-chaos-upstream={tree}"]


@pytest.mark.slow
def test_an_adapter_that_repairs_slime_would_make_the_base_tree_look_isolated(
    tmp_path: Path, slime_trees: dict[str, Path]
) -> None:
    """Fidelity: catching the group's exception in the adapter hides the bug on the base tree
    (``isolated_failures`` passes), so the slime gate (base red by isolated_failures) would read
    such an adapter's base as fixed. Its aborted rows still reach slime's train data, where
    ``train_batch_sound`` sees them as the placeholders they are."""
    verdicts = run_catalog(
        tmp_path,
        target="tests.collector.adapters._slime_trees:repairing_factory",
        scenarios=[trees.SCENARIO],
        stack_args=upstream(slime_trees[trees.BASE]),
    )[trees.SCENARIO]
    assert verdicts.invariants["isolated_failures"] == "PASS", verdicts.message
    assert verdicts.invariants["train_batch_sound"] == "FAIL", verdicts.message


TRAIN_DATA_TEST = textwrap.dedent(
    """
    import pytest

    @pytest.mark.asyncio
    async def test_train_data(chaos_collector, chaos_collector_context, chaos_gym):
        rollouts = await chaos_collector.collect(chaos_gym.rows("calculator", 4), mode="train")
        assert [(r.row_index, r.status, r.in_train_batch) for r in rollouts] == [
            (index, "completed", True) for index in range(4)
        ]
        assert all(r.turns for r in rollouts)
        history = chaos_collector_context.history
        done = [e.data for e in history.events(source="collector", kind="ok", op="upstream")]
        assert [d["call"] for d in done] == [
            "slime.rollout.sglang_rollout.generate_and_rm_group, a task per group",
            "slime.ray.rollout.RolloutManager.generate",
        ], done
        assert (done[0]["groups"], done[1]["samples"]) == (4, 4)
        invoked = history.events(source="collector", kind="invoke", op="upstream")
        generation, train_data = (event.data["stood_in"] for event in invoked)
        for named in ("generate_rollout_async's loop", "the generate hook", "GymClient"):
            assert any(named in line for line in generation), (named, generation)
        for named in ("_split_train_data_by_dp", "placeholder row's error"):
            assert any(named in line for line in train_data), (named, train_data)
    """
)


def run_child(pytester: pytest.Pytester, tree: Path, monkeypatch: pytest.MonkeyPatch, **files: str) -> Any:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(**files)
    return pytester.runpytest_subprocess(
        "--rollout-chaos",
        "--rollout-chaos-target=slime",
        *upstream(tree),
        "-p",
        "no:cacheprovider",
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize("tree", [trees.BASE, trees.HEAD])
def test_the_adapter_reads_the_rows_from_slimes_train_data(
    tree: str, pytester: pytest.Pytester, slime_trees: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_child(pytester, slime_trees[tree], monkeypatch, test_train_data=TRAIN_DATA_TEST)
    result.assert_outcomes(passed=1)


PLACEHOLDER_TEST = textwrap.dedent(
    """
    import traceback

    import pytest

    @pytest.mark.asyncio
    @pytest.mark.chaos_fault("trajectory_exception", "agent", row=2, message="tool parser crashed on row 2")
    async def test_placeholder(chaos_collector, chaos_gym):
        with pytest.raises(AttributeError, match="effective_response_length") as raised:
            await chaos_collector.collect(chaos_gym.rows("calculator", 4), mode="train")
        innermost = traceback.extract_tb(raised.value.__traceback__)[-1]
        assert innermost.filename.endswith("slime/ray/rollout.py"), innermost
        assert innermost.name in ("compute_metrics_from_samples", "<listcomp>"), innermost
    """
)


@pytest.mark.slow
def test_head_placeholder_takes_the_step_down_in_slimes_own_metrics(
    pytester: pytest.Pytester, slime_trees: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the PR's head one crashed row is a one-element list among plain Samples; slime's
    ``RolloutManager`` reads ``effective_response_length`` on it: the step raises there."""
    result = run_child(pytester, slime_trees[trees.HEAD], monkeypatch, test_placeholder=PLACEHOLDER_TEST)
    result.assert_outcomes(passed=1)


@pytest.mark.slow
def test_an_adapter_that_stops_at_generation_is_caught(tmp_path: Path, slime_trees: dict[str, Path]) -> None:
    """The adapter broken on purpose (``_slime_broken``) reads the groups ``generate_and_rm_group``
    returned: on the head tree one raising trajectory then looks isolated (green, where the real
    adapter is red with slime's own AttributeError), and a batch of placeholders is no train batch
    at all (``train_batch_sound`` has nothing to judge, where the real adapter fails it)."""
    scenarios = [trees.SCENARIO, "resources-down"]
    stack = upstream(slime_trees[trees.HEAD])
    for side in ("real", "broken"):
        (tmp_path / side).mkdir()
    real = run_catalog(tmp_path / "real", target="slime", scenarios=scenarios, stack_args=stack)
    broken = run_catalog(
        tmp_path / "broken",
        target="tests.collector.adapters._slime_broken:generation_only",
        scenarios=scenarios,
        stack_args=stack,
    )
    crashed = real[trees.SCENARIO]
    assert not crashed.passed
    assert crashed.invariants["isolated_failures"] == "FAIL", crashed.message
    assert "'list' object has no attribute 'effective_response_length'" in crashed.message
    assert "slime/ray/rollout.py:" in crashed.message, crashed.message
    assert broken[trees.SCENARIO].passed, broken[trees.SCENARIO].message
    assert real["resources-down"].invariants["train_batch_sound"] == "FAIL", real["resources-down"].message
    assert broken["resources-down"].invariants["train_batch_sound"] == "NOT_JUDGED"


@pytest.mark.slow
def test_on_slime_main_the_trajectory_manager_makes_the_samples(
    tmp_path: Path, slime_trees: dict[str, Path]
) -> None:
    """slime main never merged PR #2078 and makes its samples with ``TrajectoryManager``: the
    baseline is green, and one raising trajectory takes the step down in ``generate_and_rm_group``
    as on the base tree. A retokenized turn is realigned: the turn before it is masked out of
    training (``turns_generated``). A drift too early to realign forks the row into a second
    sample: every turn is trained, but the fork starts from the drifted prompt, which the policy
    was never sent (``prefix_consistent``, ``prompts_sent``)."""
    scenarios = ["baseline", trees.SCENARIO, "retokenization-drift", "prefix-drift"]
    verdicts = run_catalog(
        tmp_path, target="slime", scenarios=scenarios, stack_args=upstream(slime_trees[trees.MAIN])
    )
    assert verdicts["baseline"].passed, verdicts["baseline"].message
    crashed = verdicts[trees.SCENARIO]
    assert crashed.invariants["isolated_failures"] == "FAIL", crashed.message
    assert "in generate_and_rm\n" in crashed.message, crashed.message
    realigned = verdicts["retokenization-drift"]
    assert realigned.invariants["turns_generated"] == "FAIL", realigned.message
    assert "turns [0] were dropped" in realigned.message, realigned.message
    forked = verdicts["prefix-drift"]
    assert forked.invariants["turns_generated"] == "PASS", forked.message
    assert forked.invariants["prefix_consistent"] == "FAIL", forked.message
    assert forked.invariants["prompts_sent"] == "FAIL", forked.message
