"""What ``pytest --rollout-chaos`` runs when no paths are given: the scenarios, not the test suite.

In a trainer's repository, ``pytest --rollout-chaos`` means "run the chaos scenarios": the
built-in catalog plus the repository's own ``*.chaos.yaml`` files. pytest would otherwise also
collect every ordinary test of the repository (its ``testpaths``, else the current folder),
which have nothing to do with the scenarios and may need a GPU or a dataset. So in this run
only scenario files are collected, found where pytest looks without paths; conftest files are
loaded as usual, so a repository's fixtures (its collector factory, a runner) still apply.

Everything else keeps pytest's meaning: naming paths runs just those (Python tests using the
chaos fixtures included); enabling through the ini alone leaves a suite as it is; and
``rollout_chaos_catalog = false`` turns this run off, giving pytest's default collection
with the plugin on.

Built-in scenarios named with ``--rollout-chaos-scenario`` are collected beside whatever else is
(their files in the catalog added to the paths); in the scenarios-only run they are all it collects.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.scenario.model import SUFFIX


@dataclass(frozen=True, slots=True)
class DefaultRun:
    """The scenarios-only run: the places searched and the built-in catalog added (None: not added)."""

    searched: tuple[str, ...]
    catalog: Path | None
    named: tuple[str, ...] = ()  # --rollout-chaos-scenario: these built-in scenarios only

    def header_line(self) -> str:
        """One line for ``pytest_report_header``: what this run collects, and what it leaves out."""
        if self.named:
            return (
                f"rollout-chaos: no paths given: collecting the built-in scenarios {', '.join(self.named)} "
                "(--rollout-chaos-scenario); other tests are left out (name paths to run them)"
            )
        places = ", ".join(self.searched) or "nothing"
        catalog = f"the built-in catalog ({self.catalog}) and " if self.catalog is not None else ""
        return (
            f"rollout-chaos: no paths given: collecting {catalog}the *{SUFFIX} files under {places}; "
            "other tests are left out (name paths to run them)"
        )


def start(
    config: pytest.Config, *, flag_given: bool, switched_on: bool, named: tuple[str, ...] = ()
) -> DefaultRun | None:
    """Decide whether this is the scenarios-only run; if so, add the built-in catalog to the paths.

    Only when ``--rollout-chaos`` is on the command line (``flag_given``: an ini switch keeps a
    suite as it is), no paths were given (naming paths means: just these), and the ini option
    ``rollout_chaos_catalog`` is not false (``switched_on``). The catalog is added unless a path
    searched already holds it. The built-in scenarios ``named`` are added to any run's paths, and
    are the scenarios-only run's only paths.
    """
    files = [str(bundled.catalog_files()[name]) for name in named]
    if not flag_given or not switched_on or config.args_source is pytest.Config.ArgsSource.ARGS:
        config.args.extend(files)
        return None
    if files:
        config.args[:] = files
        return DefaultRun(searched=(), catalog=None, named=named)
    searched = tuple(_shown(config, arg) for arg in config.args)
    catalog = bundled.catalog_dir()
    already = [Path(arg).resolve() for arg in config.args]
    if not catalog.is_dir() or any(catalog == path or catalog.is_relative_to(path) for path in already):
        # no catalog shipped, or run from the plugin's own checkout: its scenarios/ is found anyway
        return DefaultRun(searched=searched, catalog=None)
    config.args.append(str(catalog))
    return DefaultRun(searched=searched, catalog=catalog)


def leaves_out(path: Path) -> bool:
    """Whether the scenarios-only run skips ``path``: every file but a scenario file."""
    return not path.name.endswith(SUFFIX) and not path.is_dir()


def _shown(config: pytest.Config, arg: str) -> str:
    """``arg`` relative to where pytest was started, when it lies below."""
    path = Path(arg).resolve()
    start_dir = Path(config.invocation_params.dir).resolve()
    if path == start_dir:
        return "."
    return str(path.relative_to(start_dir)) if path.is_relative_to(start_dir) else str(path)
