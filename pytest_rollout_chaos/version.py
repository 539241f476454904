"""The version of pytest-rollout-chaos, for ``__version__`` and ``rollout-chaos --version``.

Read from the installed distribution's metadata, so that it is the version pip installed. A
source tree used without installing it (put on ``PYTHONPATH``) has no metadata: there the
version in its ``pyproject.toml`` is used, and ``0+unknown`` when even that cannot be read.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path
from typing import Final

DISTRIBUTION: Final = "pytest-rollout-chaos"
UNKNOWN: Final = "0+unknown"
_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def read_version(distribution: str = DISTRIBUTION, pyproject: Path = _PYPROJECT) -> str:
    """The installed version; else the source tree's ``project.version``; else ``UNKNOWN``."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        pass
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return UNKNOWN
    if project.get("name") != distribution or not isinstance(project.get("version"), str):
        return UNKNOWN
    return str(project["version"])


__version__: Final = read_version()
