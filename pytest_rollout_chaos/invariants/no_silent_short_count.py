"""``no_silent_short_count``: fewer rollouts than rows is never handed back quietly (NeMo RL #2305).

Quiet includes failing for another reason: when the Gym client yielded fewer results than rows and
the collector raised, what it raised must say so (requested vs returned, or the rows missing). A
``TypeError`` from indexing the hole a missing row left (NeMo RL before #2394) tells the trainer
nothing about the short count, so it is judged as silent as handing the hole back.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    describe,
    not_judged,
    rollouts_to_judge,
    story,
    verdict,
)
from pytest_rollout_chaos.invariants.rules import chain

_NUMBER: Final = re.compile(r"\b\d+\b")
_MISSING: Final = re.compile(r"(?i)\bmissing\b")
_INDEX_LIST: Final = re.compile(r"\[(\s*\d+\s*(?:,\s*\d+\s*)*)\]")


class NoSilentShortCount:
    name: ClassVar[str] = "no_silent_short_count"

    def check(self, observation: Observation) -> Verdict:
        if not observation.rows:
            return not_judged(self.name, "no row was requested, so no count can come up short")
        if observation.raised is not None:
            return self._judge_raised(observation, observation.raised)
        rollouts = rollouts_to_judge(observation, self.name, raised=None)  # a raise is judged above
        if isinstance(rollouts, Verdict):
            return rollouts
        requested = observation.requested
        present = {rollout.row_index for rollout in rollouts if rollout is not None}
        missing = sorted(set(requested) - present)
        if not missing:
            return verdict(self.name, Status.PASS, f"{len(present)} of {len(requested)} rows came back")
        history = observation.history
        clues = [
            event
            for event in history
            if event.source in ("process", "fault") or (event.kind == "fail" and event.source != "collector")
        ]
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"silent short count: {len(present)} of {len(requested)} rows came back and the "
                    f"collector did not raise; rows {missing} are silently missing"
                ),
                expected=(
                    "a hard failure naming requested vs returned (the collector must raise when the Gym "
                    "client yields fewer results than rows)"
                ),
            ),
            describe(clues[-10:], history),
        )

    def _judge_raised(self, observation: Observation, raised: BaseException) -> Verdict:
        shortened = [event for event in observation.history if _is_short(event)]
        if not shortened:
            return verdict(self.name, Status.PASS, "the collector raised; nothing short was handed back")
        text = " | ".join(f"{type(link).__name__}: {link}" for link in chain(raised))
        rows, yielded = shortened[0].data["rows"], shortened[0].data["yielded"]
        if _names_short_count(text, rows, yielded):
            return verdict(self.name, Status.PASS, f"the raised error names the short count: {text[:160]}")
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"the short count went unnamed: the Gym client yielded {yielded} results for {rows} rows "
                    f"and the collector raised {text[:200]!r}, which says nothing of rows missing"
                ),
                expected="an error naming requested vs returned, or the rows that are missing",
            ),
            describe(shortened[:5], observation.history),
        )


def _is_short(event: Event) -> bool:
    data = event.data
    return (
        event.op == "short_results"
        and isinstance(data.get("rows"), int)
        and isinstance(data.get("yielded"), int)
        and data["yielded"] < data["rows"]
    )


def _names_short_count(text: str, rows: int, yielded: int) -> bool:
    """Requested and returned counts both named, rows said to be ``missing``, or the missing rows
    listed (``did not return results for samples: [2, 3]``, as verl's NeMo Gym recipe says)."""
    numbers = {int(match) for match in _NUMBER.findall(text)}
    if {rows, yielded} <= numbers or _MISSING.search(text) is not None:
        return True
    for listed in _INDEX_LIST.findall(text):
        indices = [int(item) for item in listed.split(",")]
        if len(indices) == rows - yielded and all(0 <= index < rows for index in indices):
            return True
    return False
