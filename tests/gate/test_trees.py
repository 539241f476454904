"""A tree is a folder, or a ``git archive`` tarball unpacked to its one top folder."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from pytest_rollout_chaos.gate.sides import GateUsageError, prepare_tree


def test_a_folder_is_used_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "RL").mkdir()
    assert prepare_tree(tmp_path / "RL", tmp_path / "scratch") == (tmp_path / "RL").resolve()


def test_an_archive_is_unpacked_to_its_top_folder(tmp_path: Path) -> None:
    source = tmp_path / "slime-fec3da9b" / "slime"
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("")
    archive = tmp_path / "slime-fec3da9b.tar.gz"
    with tarfile.open(archive, "w:gz") as packed:
        packed.add(source.parent, arcname="slime-fec3da9b")
    tree = prepare_tree(archive, tmp_path / "scratch")
    assert tree.name == "slime-fec3da9b"
    assert (tree / "slime" / "__init__.py").is_file()


@pytest.mark.parametrize(
    ("name", "message"), [("missing", "no such folder or archive"), ("notes.txt", "not a folder nor")]
)
def test_anything_else_says_what_is_valid(tmp_path: Path, name: str, message: str) -> None:
    if name.endswith(".txt"):
        (tmp_path / name).write_text("x")
    with pytest.raises(GateUsageError, match=message):
        prepare_tree(tmp_path / name, tmp_path / "scratch")
