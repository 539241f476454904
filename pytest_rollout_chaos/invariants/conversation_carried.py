"""``conversation_carried``: a collector that drives the policy itself carries the conversation on.

In native style the collector is the only one who holds a sample's messages: it hands the
environment the text the policy just generated, and the policy next the observation the
environment answered. Lose either and the environment scores a conversation without the model's
answer (or with an empty one), or the model answers the same prompt again without the tool's
result: the rewards still match what the environment answered, so no other judge sees it.

Judged from the servers' records only (texts fingerprinted, ``history.text_fingerprint``): the
fault layer records each policy chat answer's text (``texts``) and each chat request's last
message (``last_message``), both tied to their row; the environment records, per ``/step_batch``
item, its row and the text of its last assistant message (``answers``), and per answered item its
observation and whether it ended. Two rules:

- an item's last assistant text is the text of the policy's last answer for that row before the
  call (a regenerated answer replaces the one thrown away);
- a row the environment did not end sends its observation as the last message of its next model
  call, if it makes one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

from pytest_rollout_chaos.history import Event, History
from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict

POLICY: Final = "policy"
CHAT_OP: Final = "POST /v1/chat/completions"
RESOURCES: Final = "resources"


@dataclass(frozen=True, slots=True)
class _Said:
    """One text the servers recorded for a row, and when."""

    t: float
    row: int
    text: str | None  # None: the environment's item held no assistant message at all


class ConversationCarried:
    name: ClassVar[str] = "conversation_carried"

    def check(self, observation: Observation) -> Verdict:
        history = observation.history
        steps = history.events(source=RESOURCES, kind="info", op="step_batch")
        if not steps:
            return not_judged(self.name, "the environment served no step_batch call (gym style has none)")
        answers = _by_row(_answers(history))
        asked = _by_row(_asked(history))
        failures: list[str] = []
        judged = 0
        for handed in _handed(steps):
            before = [said for said in answers.get(handed.row, ()) if said.t < handed.t]
            if not before:
                continue
            judged += 1
            if handed.text != before[-1].text:
                failures.append(
                    f"t={handed.t - history.t0:.2f}s env.step was given row {handed.row}'s last model "
                    f"turn as {_text(handed.text)}; the policy's last answer for the row "
                    f"(t={before[-1].t - history.t0:.2f}s) was {_text(before[-1].text)}"
                )
        for answered in _observations(history):
            after = [said for said in asked.get(answered.row, ()) if said.t > answered.t]
            if not after:
                continue
            judged += 1
            if after[0].text != answered.text:
                failures.append(
                    f"t={after[0].t - history.t0:.2f}s row {answered.row}'s next model call ended with "
                    f"{_text(after[0].text)}; the environment had answered it "
                    f"(t={answered.t - history.t0:.2f}s) with an observation of {_text(answered.text)}"
                )
        if failures:
            return verdict(
                self.name,
                Status.FAIL,
                story(
                    observation,
                    what=(
                        f"{len(failures)} hand-overs lost the conversation between the policy and the "
                        "environment"
                    ),
                    expected=(
                        "each env.step given the text the policy generated for that row, and each next model "
                        "call the observation the environment answered"
                    ),
                ),
                failures,
            )
        if not judged:
            return not_judged(
                self.name,
                "no env.step item could be matched to a policy answer of its row, nor an observation to a "
                "next model call",
            )
        return verdict(
            self.name,
            Status.PASS,
            f"{judged} hand-overs between the policy and the environment carried the conversation on",
        )


def _answers(history: History) -> list[_Said]:
    """Each policy chat answer's first text, by row, as the fault layer recorded it."""
    found = []
    for event in history.events(source=POLICY, kind="ok", op=CHAT_OP):
        row, texts = event.data.get("row"), event.data.get("texts")
        if isinstance(row, int) and isinstance(texts, list) and texts and isinstance(texts[0], str):
            found.append(_Said(event.t, row, texts[0]))
    return found


def _asked(history: History) -> list[_Said]:
    """Each policy chat request's last message, by row, as the fault layer recorded it."""
    found = []
    for event in history.events(source=POLICY, kind="invoke", op=CHAT_OP):
        row, last = event.data.get("row"), event.data.get("last_message")
        if isinstance(row, int) and isinstance(last, str):
            found.append(_Said(event.t, row, last))
    return found


def _handed(steps: Sequence[Event]) -> list[_Said]:
    """Each item of the environment's calls: its row and the text of its last assistant message."""
    found = []
    for event in steps:
        rows, texts = event.data.get("rows"), event.data.get("answers")
        if not isinstance(rows, list) or not isinstance(texts, list) or len(rows) != len(texts):
            continue  # a record from an environment that does not say
        found += [
            _Said(event.t, row, text)
            for row, text in zip(rows, texts, strict=True)
            if isinstance(row, int) and (text is None or isinstance(text, str))
        ]
    return found


def _observations(history: History) -> list[_Said]:
    """Each observation the environment answered a row it did not end with."""
    found = []
    for event in history.events(source=RESOURCES, kind="ok", op="step_batch_rewards"):
        rows, texts, ended = (event.data.get(key) for key in ("rows", "observations", "terminateds"))
        if isinstance(rows, list) and isinstance(texts, list) and isinstance(ended, list):
            found += [
                _Said(event.t, row, text)
                for row, text, done in zip(rows, texts, ended, strict=False)
                if isinstance(row, int) and isinstance(text, str) and done is False
            ]
    return found


def _by_row(said: list[_Said]) -> dict[int, list[_Said]]:
    grouped: dict[int, list[_Said]] = {}
    for item in said:
        grouped.setdefault(item.row, []).append(item)
    return grouped


def _text(recorded: str | None) -> str:
    """A recorded text as a reader can follow it: its length and fingerprint, or that there was none."""
    if recorded is None:
        return "no assistant message at all"
    count = recorded.partition(":")[0].removeprefix("t")
    return "an empty text" if count == "0" else f"a text of {count} characters ({recorded})"
