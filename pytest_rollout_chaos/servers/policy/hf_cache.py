"""A Hugging Face model id (``Qwen/Qwen2.5-0.5B-Instruct``) to its folder in the local HF cache.

``--rollout-chaos-model`` takes a directory or a model id; an id is looked up where
``huggingface_hub`` keeps downloads, read by its documented layout and never downloaded:

    <hub cache>/models--<org>--<name>/refs/<revision>     the commit a branch or tag points at
    <hub cache>/models--<org>--<name>/snapshots/<commit>/ the files of that commit

The hub cache is ``HF_HUB_CACHE``, else ``HUGGINGFACE_HUB_CACHE`` (its older name), else
``HF_HOME/hub``, else ``XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``.
``ID@REVISION`` names a branch, tag or commit; without it, ``main``. The servers are started
offline (``HF_HUB_OFFLINE=1``), so a model that is not there is an error saying where it looked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

DEFAULT_REVISION: Final = "main"
# An id is one or two names of letters, digits, '-', '_', '.' (what the Hub accepts), and an optional @REV.
_MODEL_ID: Final = re.compile(r"^(?:[\w.\-]+/)?[\w.\-]+(?:@[\w.\-/]+)?$")
_COMMIT: Final = re.compile(r"^[0-9a-f]{40}$")


class ModelNotCachedError(LookupError):
    """The id is not in the local cache; the message says where it looked and what to do."""


def looks_like_id(text: str) -> bool:
    """Whether ``text`` can be a model id (``org/name``, ``name``, with an optional ``@revision``)."""
    return bool(_MODEL_ID.match(text)) and not text.startswith((".", "/", "~"))


def hub_cache(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``huggingface_hub`` keeps models, by the same variables it reads."""
    env = os.environ if environ is None else environ
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name):
            return Path(env[name]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    cache = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return cache / "huggingface" / "hub"


def resolve(model_id: str, environ: Mapping[str, str] | None = None) -> Path:
    """The snapshot folder of ``model_id`` in the local cache; ``ModelNotCachedError`` when absent."""
    repo, _, revision = model_id.partition("@")
    revision = revision or DEFAULT_REVISION
    cache = hub_cache(environ)
    folder = cache / ("models--" + repo.replace("/", "--"))
    ref = folder / "refs" / revision
    commit = ref.read_text(encoding="utf-8").strip() if ref.is_file() else ""
    if not commit and _COMMIT.match(revision):
        commit = revision
    snapshot = folder / "snapshots" / commit if commit else None
    if snapshot is not None and (snapshot / "config.json").is_file():
        return snapshot
    if not folder.is_dir():
        where = f"there is no {folder.name} in the Hugging Face cache at {cache}"
    elif snapshot is None:
        where = f"{folder} has no {ref.relative_to(folder)} (the revision {revision!r} was never downloaded)"
    else:
        where = f"{snapshot} holds no config.json (the download is incomplete)"
    raise ModelNotCachedError(
        f"model {model_id!r} is not in the local Hugging Face cache: {where} (read from HF_HUB_CACHE, "
        "HF_HOME or ~/.cache/huggingface); nothing is downloaded during a run, so fetch it first "
        f"(`hf download {repo}`{f' --revision {revision}' if revision != DEFAULT_REVISION else ''}), "
        "or pass a model directory"
    )
