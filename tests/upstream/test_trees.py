"""The pinned trees are what their manifests say: the listed files and nothing else, the commit in
the header where the gate reads it, and the bytes ``trim.py`` makes from them."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.upstream.trim import HERE, manifest, read_source, trim

TREES = sorted(path.name.removesuffix(".files") for path in HERE.glob("*.files"))


def test_every_manifest_has_its_tree_and_every_tree_its_manifest() -> None:
    tarballs = sorted(path.name.removesuffix(".tar.gz") for path in HERE.glob("*.tar.gz"))
    assert tarballs == TREES
    assert len(TREES) == 15


@pytest.mark.parametrize("name", TREES)
def test_a_tree_holds_its_listed_files_and_names_its_commit(name: str) -> None:
    commit, files = manifest(name)
    with tarfile.open(HERE / f"{name}.tar.gz") as archive:
        members = [member.name for member in archive.getmembers() if member.isfile()]
        assert archive.pax_headers.get("comment") == commit
    assert sorted(members) == sorted(f"{name}/{path}" for path in files)
    assert "LICENSE" in files
    assert len(commit) == 40


@pytest.mark.parametrize("name", TREES)
def test_trimming_a_tree_again_gives_the_same_bytes(name: str, tmp_path: Path) -> None:
    remade = trim(HERE / f"{name}.tar.gz", name, into=tmp_path)
    assert remade.read_bytes() == (HERE / f"{name}.tar.gz").read_bytes()


def test_a_bare_git_directory_is_archived_like_a_checkout(tmp_path: Path) -> None:
    work, bare = tmp_path / "work", tmp_path / "repo.git"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    (work / "LICENSE").write_text("Apache-2.0\n")
    subprocess.run([*git, "-C", str(work), "add", "LICENSE"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "clone", "-q", "--bare", str(work), str(bare)], check=True)
    commit = subprocess.run(
        ["git", "-C", str(bare), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    with read_source(bare, "tree", commit, ["LICENSE"]) as archive:
        assert [member.name for member in archive.getmembers() if member.isfile()] == ["tree/LICENSE"]
