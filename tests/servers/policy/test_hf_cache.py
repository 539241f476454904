"""Model ids found in a Hugging Face cache laid out as huggingface_hub lays it out, never downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos.servers.policy import hf_cache
from pytest_rollout_chaos.servers.policy.hf_cache import ModelNotCachedError

COMMIT = "7ae557604adf67be50417f59c2c2f167def9a775"
OLD_COMMIT = "0" * 40


def _download(hub: Path, repo: str, commit: str, *, ref: str | None = "main") -> Path:
    """What ``hf download REPO`` leaves: blobs, a snapshot of links to them, and the ref."""
    folder = hub / ("models--" + repo.replace("/", "--"))
    blobs = folder / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name, text in (("config.json", '{"model_type": "qwen2"}'), ("tokenizer.json", "{}")):
        blob = blobs / f"{commit[:8]}-{name}"
        blob.write_text(text)
        (snapshot / name).symlink_to(Path("../../blobs") / blob.name)
    if ref is not None:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / ref).write_text(commit)
    return snapshot


def test_an_id_resolves_to_the_snapshot_main_points_at(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    _download(hub, "Qwen/Qwen2.5-0.5B-Instruct", OLD_COMMIT, ref=None)
    snapshot = _download(hub, "Qwen/Qwen2.5-0.5B-Instruct", COMMIT)
    found = hf_cache.resolve("Qwen/Qwen2.5-0.5B-Instruct", {"HF_HUB_CACHE": str(hub)})
    assert found == snapshot
    assert (found / "config.json").read_text() == '{"model_type": "qwen2"}'


def test_a_revision_by_branch_or_commit(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    pinned = _download(hub, "org/model", OLD_COMMIT, ref="v1")
    env = {"HF_HUB_CACHE": str(hub)}
    assert hf_cache.resolve("org/model@v1", env) == pinned
    assert hf_cache.resolve(f"org/model@{OLD_COMMIT}", env) == pinned


@pytest.mark.parametrize(
    ("environ", "hub"),
    [
        ({"HF_HUB_CACHE": "{t}/a", "HF_HOME": "{t}/b"}, "{t}/a"),
        ({"HUGGINGFACE_HUB_CACHE": "{t}/a", "HF_HOME": "{t}/b"}, "{t}/a"),
        ({"HF_HOME": "{t}/b"}, "{t}/b/hub"),
        ({"XDG_CACHE_HOME": "{t}/c"}, "{t}/c/huggingface/hub"),
    ],
)
def test_the_hub_cache_is_where_huggingface_hub_keeps_it(
    tmp_path: Path, environ: dict[str, str], hub: str
) -> None:
    env = {name: value.format(t=tmp_path) for name, value in environ.items()}
    assert hf_cache.hub_cache(env) == Path(hub.format(t=tmp_path))
    snapshot = _download(Path(hub.format(t=tmp_path)), "org/model", COMMIT)
    assert hf_cache.resolve("org/model", env) == snapshot


def test_default_hub_cache_is_under_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hf_cache.hub_cache({}) == tmp_path / ".cache" / "huggingface" / "hub"


def test_a_model_not_in_the_cache_says_where_it_looked_and_that_nothing_is_downloaded(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    with pytest.raises(ModelNotCachedError) as caught:
        hf_cache.resolve("Qwen/Qwen2.5-7B-Instruct", {"HF_HUB_CACHE": str(hub)})
    text = str(caught.value)
    assert f"there is no models--Qwen--Qwen2.5-7B-Instruct in the Hugging Face cache at {hub}" in text
    assert "nothing is downloaded during a run" in text
    assert "`hf download Qwen/Qwen2.5-7B-Instruct`" in text


def test_a_revision_never_downloaded_and_an_incomplete_download_are_told_apart(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    snapshot = _download(hub, "org/model", COMMIT)
    env = {"HF_HUB_CACHE": str(hub)}
    with pytest.raises(
        ModelNotCachedError, match=r"has no refs/v2 \(the revision 'v2' was never downloaded\)"
    ):
        hf_cache.resolve("org/model@v2", env)
    (snapshot / "config.json").unlink()
    with pytest.raises(ModelNotCachedError, match=r"holds no config.json \(the download is incomplete\)"):
        hf_cache.resolve("org/model", env)


@pytest.mark.parametrize(
    ("text", "is_id"),
    [
        ("Qwen/Qwen2.5-0.5B-Instruct", True),
        ("gpt2", True),
        ("org/model@v1.0", True),
        ("./model", False),
        ("/abs/model", False),
        ("~/model", False),
        ("a/b/c", False),
        ("has space/x", False),
    ],
)
def test_looks_like_id(text: str, is_id: bool) -> None:
    assert hf_cache.looks_like_id(text) is is_id
