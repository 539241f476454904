"""A local Ray cluster for the adapters' tests, one per pytest session, until an option starts it.

Two doors, one way in (``started_ray``): the ``ray_session`` fixture starts it in this pytest
process; a child pytest gets it with ``-p tests.adapters._ray_session`` (``CHILD_PLUGIN``),
whose hooks start it at session start, before any collector is built, and stop it at session
end. Ray's unix sockets live under ``RAY_TMPDIR``, which must stay short (socket paths end at
107 characters), so a long temporary folder is swapped for a short one of the system's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

CHILD_PLUGIN: Final = ("-p", "tests.adapters._ray_session")
NUM_CPUS: Final = 2
LONGEST_TMP: Final = 40
"""Ray adds about 60 characters (session folder, ``sockets/plasma_store``) below its temp folder."""


@contextlib.contextmanager
def started_ray(under: Path | None = None) -> Iterator[Any]:
    """``ray.init`` on a fresh local cluster with its files under ``under`` (when short enough,
    else in a short folder of the system's, removed afterwards); ``ray.shutdown`` afterwards,
    which stops every Ray process it started."""
    import ray

    fits = under is not None and len(str(under)) <= LONGEST_TMP
    short = under if under is not None and fits else Path(tempfile.mkdtemp(prefix="ray-"))
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(short)
    try:
        with warnings.catch_warnings():  # Ray's own start-up warnings are not the tests' outcome
            warnings.simplefilter("default")
            ray.init(num_cpus=NUM_CPUS, include_dashboard=False, log_to_driver=False)
        try:
            yield ray
        finally:
            ray.shutdown()
    finally:
        if saved is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved
        if not fits:
            shutil.rmtree(short, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Ray initialised in this pytest process; skip where Ray is not installed."""
    pytest.importorskip("ray")
    with started_ray(tmp_path_factory.mktemp("ray", numbered=True)) as ray:
        yield ray


# -- as a plugin of a child pytest (``-p tests.adapters._ray_session``) ----------------------------

_ray_stack = contextlib.ExitStack()


def pytest_sessionstart(session: pytest.Session) -> None:
    _ray_stack.enter_context(started_ray())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _ray_stack.close()
