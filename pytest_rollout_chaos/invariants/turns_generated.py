"""``turns_generated``: a returned rollout's turns are the generations recorded for its row.

Splicing repairs prompts; what the model generated never changes. So the generation ids of a
completed (or truncated) rollout's turns must be, in count and in order, what one of that row's
successful ``/run`` answers generated (gym style), or each one a generation the policy answered
for that row (native style; rows sharing a prompt may be untied, so the record is the pool of
the row's and the untied answers). Dropped or truncated turns on drift, or a turn the model
never produced, fail. Fingerprints (``history.fingerprint``) are compared, not the ids. With no
rollout handing back turns, or no record to hold them against, nothing is judged (NOT_JUDGED).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.history import fingerprint, fingerprint_length
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    not_judged,
    story,
    turns_handed_on,
    verdict,
)
from pytest_rollout_chaos.invariants.served import Served, served


class TurnsGenerated:
    name: ClassVar[str] = "turns_generated"

    def check(self, observation: Observation) -> Verdict:
        claimed = turns_handed_on(observation, self.name, "turns")
        if isinstance(claimed, Verdict):
            return claimed
        record = served(observation.history)
        if record.style is None:
            return not_judged(
                self.name,
                f"{len(claimed)} rollouts hand back turns, but the History holds no server-side record of "
                "generations (no fault layer in front of the servers?), so none can be checked",
            )
        check = _gym_problem if record.style == "gym" else _native_problem
        problems = [problem for rollout in claimed if (problem := check(rollout, record)) is not None]
        if not problems:
            return verdict(
                self.name,
                Status.PASS,
                f"the turns of {len(claimed)} rollouts are the generations recorded for their rows",
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"{len(problems)} rollouts hand back turns that are not what the model generated for "
                    "their row: the trainer would train on dropped, cut or invented turns"
                ),
                expected=(
                    "every turn the servers generated for the row, in order, with the model's own ids "
                    "(a splice may change prompts, never generations), or the row aborted with the reason"
                ),
            ),
            problems,
        )


def _lengths(fingerprints: Sequence[str]) -> list[int | None]:
    return [fingerprint_length(value) for value in fingerprints]


def _gym_problem(rollout: Rollout, record: Served) -> str | None:
    claimed = [fingerprint(turn.generation_token_ids) for turn in rollout.turns]
    answers = [list(call.generations) for call in record.calls(rollout.row_index) if call.succeeded]
    if claimed in answers:
        return None
    claim = (
        f"row {rollout.row_index}: the collector hands back {_turns(len(claimed))} "
        f"(generated token counts {_lengths(claimed)})"
    )
    answers = [answer for answer in answers if answer]
    if not answers:
        return f"{claim}, but no /run answer for row {rollout.row_index} recorded any generation"
    # the attempt the collector most likely took: the one sharing most generations with its turns
    closest = max(
        answers, key=lambda answer: (len(set(answer) & set(claimed)), -abs(len(answer) - len(claimed)))
    )
    saw = f"the agent's /run answered {_turns(len(closest))} (token counts {_lengths(closest)})"
    invented = [index for index, value in enumerate(claimed) if value not in closest]
    if invented:
        return f"{claim}; {saw}: turns {invented} are not among them (the model never produced them)"
    if len(claimed) < len(closest):
        dropped = [index for index, value in enumerate(closest) if value not in claimed]
        return f"{claim}; {saw}: turns {dropped} were dropped"
    return f"{claim}; {saw}: the same generations in another order or repeated"


def _native_problem(rollout: Rollout, record: Served) -> str | None:
    own = [value for call in record.calls(rollout.row_index) if call.succeeded for value in call.generations]
    untied = [value for call in record.untied if call.succeeded for value in call.generations]
    pool = set(own) | set(untied)
    claimed = [fingerprint(turn.generation_token_ids) for turn in rollout.turns]
    invented = [index for index, value in enumerate(claimed) if value not in pool]
    claim = f"row {rollout.row_index}: the collector hands back {_turns(len(claimed))}"
    saw = (
        f"the policy answered {len(own)} generations for row {rollout.row_index} "
        f"(token counts {_lengths(own)}) and {len(untied)} it could not tie to a row"
    )
    if invented:
        return f"{claim}; {saw}: turns {invented} are none of them (the model never produced them)"
    if len(claimed) > len(own) + len(untied):
        return f"{claim}; {saw}: more turns than model calls"
    return None


def _turns(count: int) -> str:
    return f"{count} turn" if count == 1 else f"{count} turns"
