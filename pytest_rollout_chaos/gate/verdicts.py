"""One side's verdicts, read back from the JUnit XML its pytest wrote.

Each scenario's test case carries its name, its outcome and every invariant's status as JUnit
properties (``scenario_items.add_junit_properties``); a skipped or broken case has only its message. A case
whose collector could not import a module of the trainer keeps that module (and the install line
an adapter gave): such a verdict says nothing about the trainer's behaviour, so the gate does not
judge it. A skip whose reason starts ``NOT_JUDGED:`` (``errors.NotJudgedError``) is read as its own
outcome, ``not_judged``: the collector could have run it and declined, naming why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal
from xml.etree import ElementTree

from pytest_rollout_chaos.errors import NOT_JUDGED_PREFIX

Outcome = Literal["passed", "failed", "error", "skipped", "not_judged"]
RED: Final = ("failed", "error")
NOT_JUDGED_OUTCOME: Final = "not_judged"
"""A scenario the collector declined to judge (a skip whose reason starts ``NOT_JUDGED:``)."""
_TAGS: Final[tuple[tuple[str, Outcome], ...]] = (
    ("failure", "failed"),
    ("error", "error"),
    ("skipped", "skipped"),
)
MESSAGE_CHARS: Final = 400
# Where pytest.skip was called, in front of a skip's reason: ``/path/run.py:170: ``.
_SKIP_LOCATION: Final = re.compile(r"^\S+:\d+: ")
# A failing invariant's line in a scenario's story: ``    accounted: FAIL: rows [3] ...``, and
# what made a run vacuous: ``    prefix_consistent: NOT_JUDGED: ...``, ``    multi_turn_rows: NOT_SEEN: ...``.
_INVARIANT_FAILED: Final = re.compile(r"^\s+[a-z_]+: (FAIL|UNKNOWN|NOT_JUDGED|NOT_SEEN): ")
# An adapter's ``Upstream.require``: ``module 'megatron' is missing (...); install it with: LINE; or``.
_ADAPTER_MISSING: Final = re.compile(
    r"module '(?P<module>[\w.]+)' is missing \(.*?\); install it with: (?P<install>.+?); or point"
)
# Python's own words, wherever the collector or its factory raised it.
_NO_MODULE: Final = re.compile(r"No module named '(?P<module>[\w.]+)'")


@dataclass(frozen=True, slots=True)
class MissingModule:
    """A module of the trainer that could not be imported, and how to install it when known."""

    module: str
    install: str = ""


def missing_module(text: str) -> MissingModule | None:
    """The module ``text`` (a failure story, an outcome, a log tail) says could not be imported."""
    found = _ADAPTER_MISSING.search(text)
    if found is not None:
        return MissingModule(found["module"], found["install"].strip())
    found = _NO_MODULE.search(text)
    return MissingModule(found["module"]) if found is not None else None


@dataclass(frozen=True, slots=True)
class ScenarioVerdicts:
    """How one scenario ended on one side, and what each invariant said."""

    name: str
    outcome: Outcome
    invariants: Mapping[str, str] = field(default_factory=dict)
    message: str = ""
    missing: MissingModule | None = None

    @property
    def red(self) -> bool:
        return self.outcome in RED

    def to_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "invariants": dict(self.invariants),
            "message": self.message,
            "missing_module": self.missing.module if self.missing else None,
        }


def read_junit(path: Path) -> dict[str, ScenarioVerdicts]:
    """Verdicts by scenario name from ``path``; test cases that are not scenarios are left out."""
    found: dict[str, ScenarioVerdicts] = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        properties = {item.get("name", ""): item.get("value", "") for item in case.iter("property")}
        name = properties.get("scenario") or _scenario_name(case.get("name") or "")
        if not name:
            continue
        outcome, message, text = _outcome(case)
        found[name] = ScenarioVerdicts(
            name=name,
            outcome=outcome,
            invariants={
                key.removeprefix("invariant:"): value
                for key, value in properties.items()
                if key.startswith("invariant:")
            },
            message=message,
            missing=missing_module(properties.get("outcome", "") + "\n" + text),
        )
    return found


def _scenario_name(case_name: str) -> str:
    """A scenario item is named after its scenario; anything with a parameter id is not one."""
    return "" if "[" in case_name else case_name


def _outcome(case: ElementTree.Element) -> tuple[Outcome, str, str]:
    """How the case ended, why in short, and its whole text."""
    for tag, outcome in _TAGS:
        element = case.find(tag)
        if element is not None:
            text = element.text or element.get("message") or ""
            if outcome == "skipped":
                reason = _SKIP_LOCATION.sub("", element.get("message") or text).strip()
                if reason.startswith(NOT_JUDGED_PREFIX):
                    return "not_judged", _why(reason.removeprefix(NOT_JUDGED_PREFIX)), text
                return outcome, _why(_SKIP_LOCATION.sub("", text)), text
            return outcome, _why(text), text
    return "passed", "", ""


def _why(text: str) -> str:
    """What a scenario's failure story says went wrong: the unmet expectations and the failing
    invariants, without its description and timeline; any other text's first line."""
    lines = text.strip().splitlines()
    reasons = [line.strip() for line in lines if _INVARIANT_FAILED.match(line)]
    for at, line in enumerate(lines[:-1]):
        if line.strip() == "expected:":
            reasons.insert(0, "expected " + lines[at + 1].strip())
    why = "; ".join(reasons) or (lines[0].strip() if lines else "")
    return why if len(why) <= MESSAGE_CHARS else why[: MESSAGE_CHARS - 1] + "…"
