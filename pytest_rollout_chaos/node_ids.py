"""Node ids for scenario files outside the rootdir, chosen so that the id pytest prints reruns them.

pytest names a file outside its rootdir from the folder it was given in (``NAME.chaos.yaml`` for a
file of the built-in catalog in the installed package, only ``::NAME`` for a file given itself)
and prints ids relative to where it was started: pasted back, such an id names no file. So:

- a built-in scenario's id is ``NAME.chaos.yaml::NAME``, as if its file lay at the rootdir, and an
  argument naming a file there that does not exist under a built-in scenario's file name is taken
  as that scenario (``resolve_args``). pytest then takes its rootdir and ini from where it was
  started, as in the run that printed the id, which a path into the installed package would change
  (and with it the ``rollout_chaos_target`` the user set);
- any other scenario file outside the rootdir is named by its absolute path.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.scenario.model import SUFFIX


def file_nodeid(path: Path, config: pytest.Config) -> str | None:
    """The node id of the scenario file at ``path``; None for pytest's own (a file below the rootdir)."""
    rootpath = config.rootpath
    if path.is_relative_to(rootpath):
        return None
    if _is_builtin(path) and not (rootpath / path.name).exists():  # a file of the user's there wins
        return path.name
    return path.as_posix()


def resolve_args(config: pytest.Config) -> None:
    """Replace each argument that names a built-in scenario by its id with its catalog file's path."""
    files = bundled.catalog_files()
    for index, arg in enumerate(config.args):
        path_text, sep, names = arg.partition("::")
        given = Path(os.path.normpath(Path(config.invocation_params.dir) / path_text))
        name = given.name.removesuffix(SUFFIX)
        if given.exists() or name not in files or given != config.rootpath / given.name:
            continue
        config.args[index] = f"{files[name]}{sep}{names}"


def _is_builtin(path: Path) -> bool:
    files = bundled.catalog_files()
    name = path.name.removesuffix(SUFFIX)
    return name in files and files[name].resolve() == path.resolve()
