"""An adapter's copied upstream lines hold only on the trees they mirror: on a tree whose function
changed the adapter declines (NOT_JUDGED), naming the function, the file and the line.

Read from the pinned NeMo RL trees' ``grpo.py`` and slime trees' ``sglang_rollout.py`` (no trainer
import: this runs in the plain project venv); a copy of one tree is edited the way upstream changes
move the function.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from pytest_rollout_chaos.collector.adapters import nemo_rl_step_3eebe4da, nemo_rl_step_7ea279ab, slime
from pytest_rollout_chaos.collector.adapters.copied import CopiedFrom, Versions
from pytest_rollout_chaos.collector.adapters.nemo_rl_train_batch import COPIED
from pytest_rollout_chaos.errors import NotJudgedError
from tests.collector.adapters._trees import upstream_dir

PINNED = ("nemo-rl-3eebe4da", "nemo-rl-964b609a", "nemo-rl-3069f281", "nemo-rl-c6a661e8")
MAIN = "nemo-rl-7ea279ab"
GRPO = "nemo_rl/algorithms/grpo.py"


def _grpo(tree: str, into: Path) -> Path:
    return _member(tree, GRPO, into)


def _member(tree: str, name: str, into: Path) -> Path:
    archive = upstream_dir() / f"{tree}.tar.gz"
    if not archive.is_file():
        pytest.skip(f"no {archive.name} in {upstream_dir()}")
    with tarfile.open(archive) as unpacked:
        member = unpacked.extractfile(f"{tree}/{name}")
        assert member is not None
        path = into / tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(member.read())
    return path


@pytest.mark.parametrize("tree", [*PINNED, MAIN])
def test_the_copy_holds_on_every_pinned_tree(tree: str, tmp_path: Path) -> None:
    path = _grpo(tree, tmp_path)
    assert COPIED.stale(path) is None
    COPIED.require(path)


@pytest.mark.parametrize("tree", [*PINNED, MAIN])
def test_each_tree_runs_the_copy_made_from_its_own_version(tree: str, tmp_path: Path) -> None:
    """The trees before NeMo RL #3000 keep their copy; main runs the one made from main."""
    path = _grpo(tree, tmp_path)
    expected = nemo_rl_step_7ea279ab if tree == MAIN else nemo_rl_step_3eebe4da
    assert COPIED.chosen(path) == expected.COPIED
    assert COPIED.require(path) == expected.COPIED


def test_one_version_alone_declines_the_other_naming_only_its_trees(tmp_path: Path) -> None:
    path = _grpo(MAIN, tmp_path)
    old_only = Versions((nemo_rl_step_3eebe4da.COPIED,))
    assert old_only.chosen(path) is None
    why = old_only.stale(path)
    assert why is not None
    assert "the copy mirrors NVIDIA-NeMo/RL 3eebe4da, 964b609a, 3069f281 and c6a661e8)" in why


def test_versions_are_copies_of_one_function() -> None:
    other = CopiedFrom("nemo_rl.algorithms.grpo", "validate", frozenset({"0"}), "somewhere")
    with pytest.raises(ValueError, match="copies of one upstream function"):
        Versions((nemo_rl_step_3eebe4da.COPIED, other))


def test_comments_blank_lines_and_a_moved_function_do_not_count_as_a_change(tmp_path: Path) -> None:
    path = _grpo(PINNED[0], tmp_path)
    source = path.read_text()
    moved = "# a comment\n\n\ndef helper_added_above():\n    return 1\n\n\n" + source.replace(
        "def grpo_train(", "def grpo_train(  # reformatted\n", 1
    )
    path.write_text(moved)
    assert COPIED.stale(path) is None


def test_a_changed_grpo_train_is_not_judged_naming_the_function_file_and_line(tmp_path: Path) -> None:
    """What NeMo RL #3000 did, in small: a statement of grpo_train's body changes."""
    path = _grpo(PINNED[0], tmp_path)
    source = path.read_text()
    at = source.index("def grpo_train(")
    line = source[:at].count("\n") + 1
    body = source.index("dynamic_sampling(", at)
    path.write_text(source[:body] + "dynamic_sampling_v2(" + source[body + len("dynamic_sampling(") :])
    why = COPIED.stale(path)
    assert why is not None
    assert why.startswith(f"grpo_train changed since the adapter's copy ({path}:{line}, fingerprint ")
    assert "the copy mirrors NVIDIA-NeMo/RL 3eebe4da, 964b609a, 3069f281 and c6a661e8; " in why
    assert "NVIDIA-NeMo/RL 7ea279ab" in why
    with pytest.raises(NotJudgedError, match="grpo_train changed since the adapter's copy"):
        COPIED.require(path)


def test_a_tree_without_the_function_is_not_judged(tmp_path: Path) -> None:
    path = _grpo(PINNED[0], tmp_path)
    path.write_text(path.read_text().replace("def grpo_train(", "def grpo_train_renamed(", 1))
    assert COPIED.stale(path) == (
        f"grpo_train is gone from nemo_rl.algorithms.grpo ({path}): the adapter runs lines copied from it"
    )


def test_a_method_is_found_in_its_class_only(tmp_path: Path) -> None:
    """``Class.method`` (SkyRL's ``RayPPOTrainer.train``): a function of that name elsewhere does
    not count."""
    path = tmp_path / "trainer.py"
    path.write_text(
        "def train():\n    return 0\n\n\nclass Trainer:\n    def train(self):\n        return 1\n"
    )
    method = CopiedFrom("pkg.trainer", "Trainer.train", frozenset(), "none")
    function = CopiedFrom("pkg.trainer", "train", frozenset(), "none")
    found = method.locate(path)
    assert found.line == 6
    assert found.fingerprint != function.locate(path).fingerprint
    path.write_text("class Other:\n    def train(self):\n        return 1\n")
    assert method.locate(path).fingerprint is None


# -- slime: the adapter's step is generate_rollout_async's wait loop -----------------------------------
SLIME_TREES = ("slime-fec3da9b", "slime-1bc255ed", "slime-624b824a")
SGLANG_ROLLOUT = "slime/rollout/sglang_rollout.py"


@pytest.mark.parametrize("tree", SLIME_TREES)
def test_slimes_step_holds_on_every_pinned_slime_tree_main_included(tree: str, tmp_path: Path) -> None:
    path = _member(tree, SGLANG_ROLLOUT, tmp_path)
    assert slime.COPIED.stale(path) is None


def test_a_changed_generate_rollout_async_is_not_judged(tmp_path: Path) -> None:
    """A tree that stopped reading each finished task's result would make the adapter's loop a stale copy."""
    path = _member(SLIME_TREES[-1], SGLANG_ROLLOUT, tmp_path)
    source = path.read_text()
    at = source.index("async def generate_rollout_async(")
    changed = source[:at] + source[at:].replace("task.result()", "task.exception()", 1)
    path.write_text(changed)
    with pytest.raises(NotJudgedError, match="generate_rollout_async changed since the adapter's copy"):
        slime.COPIED.require(path)
