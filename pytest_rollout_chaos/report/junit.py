"""The JUnit XML class name of a scenario's test case, as CI interfaces show it.

pytest's ``--junitxml`` names a case's class after its node id's file, slashes turned to dots and
``.py`` dropped: ``tests/test_x.py::test_y`` is class ``tests.test_x``. A scenario file keeps its
``.chaos.yaml``, so ``scenarios/short-results.chaos.yaml::short-results`` would be class
``scenarios.short-results.chaos.yaml``. Jenkins splits a class name at its last dot into package
and class (package ``scenarios.short-results.chaos``, class ``yaml``) and other JUnit viewers nest
packages at every dot; GitLab shows the class name whole as the case's suite.

So the suffix is dropped as pytest drops ``.py``: ``scenarios.short-results`` (package
``scenarios``, class ``short-results``, beside the Python tests of the same folder). A dot within a
folder's or file's name becomes ``_``, so that every dot is a package boundary; a file outside the
rootdir, named by its absolute path, is its file name alone (the machine's folders are no
package); ``--junit-prefix`` comes first, as pytest puts it.

pytest offers no public way to set a case's class name for a plugin: ``record_xml_attribute`` is
experimental (its warning fails a ``filterwarnings = error`` run) and runs where the test runs,
which under xdist is a worker, while the XML is written by the controller. So the case is renamed
there, before junitxml's writer opens it: the writer keeps an attribute already set on its case
reporter over the one it computes. Without ``--junitxml`` (or with a junitxml that has no case
reporters) this does nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_rollout_chaos.scenario.model import SUFFIX


def scenario_classname(nodeid: str, prefix: str | None = None) -> str | None:
    """The class name of the case ``nodeid`` names; None for a test that is not a scenario's."""
    path = nodeid.split("::", 1)[0]
    if not path.endswith(SUFFIX):
        return None
    parts = path.removesuffix(SUFFIX).split("/")
    if path.startswith("/"):  # outside the rootdir
        parts = parts[-1:]
    names = [part.replace(".", "_") for part in parts if part and part != ".."]
    return ".".join([prefix, *names] if prefix else names)


class JunitNames:
    """Registered with the plugin: renames each scenario's case in junitxml's report."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    @pytest.hookimpl(tryfirst=True)  # before junitxml's writer opens the case
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        xml = _junit_writer(self._config)
        if xml is None:
            return
        classname = scenario_classname(report.nodeid, getattr(xml, "prefix", None))
        if classname is not None:
            reporter = xml.node_reporter(report)
            if isinstance(getattr(reporter, "attrs", None), dict):
                reporter.attrs["classname"] = classname


def _junit_writer(config: pytest.Config) -> Any:
    """junitxml's writer of this run (the controller's, under xdist), or None."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest whose junitxml is laid out otherwise: pytest's own names stand
        return None
    xml = config.stash.get(xml_key, None)
    return xml if callable(getattr(xml, "node_reporter", None)) else None
