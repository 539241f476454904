"""``prompts_sent``: each turn handed on carries the prompt ids the policy was sent for it.

``prefix_consistent`` checks that a turn's prompt starts with the turns before it; a prompt that
starts right but is not what was sent (the end-of-turn id doubled at a splice, a tail cut or
padded) passes it, and the trainer then computes logprobs over a context the model never saw. So
each turn of a completed (or truncated) rollout is held, id for id, against the fault layer's
record of the row's ``/run`` answer that generated its turns (gym style): each model call's prompt
as the model server sent it to the policy (``prompts``: a fingerprint each; the ids it took from
``/tokenize``, or spliced). Where that answer's prompts drifted (``drifted``, with every prompt in
full under ``prompt_ids``), a turn must instead hold exactly the splice the judge rebuilds from
the record (``rules.splice_owed``): the turns before it as owed, its previous generation, then
what the drifted prompt holds after the end of the previous assistant turn. A turn whose prompt
did not drift after a spliced one is rebuilt alike, since the record's prompt then extends the
drifted history, not the repaired one.

Judged where the record holds the ``/run`` answer that generated a rollout's turns and the
prompts it sent; a rollout with none is ``turns_generated``'s business. In native style a
collector that asks the policy token in, token out (``/inference/v1/generate``: SkyRL's loop) is
held alike, turn by turn: each turn's prompt ids must be those the model call that generated it
was sent (the layer's ``sent_ids`` of the row's call with that one generation; a turn no such call
generated is not held). A native collector that sends the policy messages ties no prompt ids to a
turn: NOT_JUDGED, as with no rollout judged at all.
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
from pytest_rollout_chaos.invariants.rules import splice_owed
from pytest_rollout_chaos.invariants.served import Call, Served, served

Judged = tuple[bool, str | None]  # (the record held what to compare with, the problem found)


class PromptsSent:
    name: ClassVar[str] = "prompts_sent"

    def check(self, observation: Observation) -> Verdict:
        claimed = turns_handed_on(observation, self.name, "prompt")
        if isinstance(claimed, Verdict):
            return claimed
        record = served(observation.history)
        if record.style is None:
            return not_judged(
                self.name,
                f"{len(claimed)} rollouts hand back prompts, but the History holds no /run answer that says "
                "what each model call was sent",
            )
        check = _problem if record.style == "gym" else _native_problem
        judged = [check(rollout, record) for rollout in claimed]
        held = sum(1 for found, _ in judged if found)
        problems = [problem for _, problem in judged if problem is not None]
        if not held and record.style == "native":
            return not_judged(
                self.name,
                f"{len(claimed)} rollouts hand back prompts, but no model call that generated their turns "
                "was sent token ids (native style: the collector sends the policy messages, not ids)",
            )
        if not held:
            return not_judged(
                self.name,
                f"the turns of none of {len(claimed)} rollouts are in a /run answer that recorded the "
                "prompts it sent (turns_generated judges turns no answer generated)",
            )
        if not problems:
            return verdict(
                self.name,
                Status.PASS,
                f"the prompts of {held} of {len(claimed)} rollouts are, id for id, what the policy was sent "
                "(or the splice its drifted prompts owe)"
                + (" (the others' turns are in no answer)" if held < len(claimed) else ""),
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"{len(problems)} rollouts hand back prompts the policy was never sent for their turns: "
                    "the trainer would compute logprobs over a context the model never saw"
                ),
                expected=(
                    "each turn's prompt ids exactly as the policy received them, or, where they drifted, "
                    "exactly the EOS-boundary splice of the row's own tokens and the drifted prompt's tail"
                ),
            ),
            problems,
        )


UNREPAIRABLE = "no splice"  # owed where a drifted prompt leaves no end of turn to splice at


def _problem(rollout: Rollout, record: Served) -> Judged:
    generated = [fingerprint(turn.generation_token_ids) for turn in rollout.turns]
    answers = [
        call
        for call in record.calls(rollout.row_index)
        if call.succeeded and list(call.generations) == generated and len(call.prompts) == len(generated)
    ]
    if not answers:
        return False, None
    handed = [fingerprint(turn.prompt_token_ids) for turn in rollout.turns]
    mismatches = [_mismatch(handed, _owed(call, rollout)) for call in answers]
    if any(found is None for found in mismatches):
        return True, None
    turn, owed, spliced = next(found for found in mismatches if found is not None)
    given = handed[turn]
    claim = f"row {rollout.row_index}: turn {turn} hands on a prompt of {_count(given)} ids ({given})"
    if owed == UNREPAIRABLE:
        return True, (
            f"{claim}, but the prompt the policy was sent for it drifted with no end of turn left to "
            "splice at: no prompt is owed, the row is owed an abort with the drift as its reason"
        )
    sent = "the policy was sent"
    if spliced:
        sent = f"the splice rebuilt from the drifted prompt {sent}"
    return True, f"{claim} where {sent} {_count(owed)} ids ({owed})"


def _native_problem(rollout: Rollout, record: Served) -> Judged:
    """Each turn held to the prompt ids the row's token-in model call that generated it was sent
    (rows sharing a prompt may leave calls untied: those count too, as in ``turns_generated``)."""
    calls = [
        call for call in (*record.calls(rollout.row_index), *record.untied) if call.succeeded and call.prompts
    ]
    held = False
    for index, turn in enumerate(rollout.turns):
        generated = (fingerprint(turn.generation_token_ids),)
        sent = [call.prompts[0] for call in calls if call.generations == generated and len(call.prompts) == 1]
        if not sent:
            continue
        held = True
        given = fingerprint(turn.prompt_token_ids)
        if given not in sent:
            return True, (
                f"row {rollout.row_index}: turn {index} hands on a prompt of {_count(given)} ids ({given}) "
                f"where the model call that generated it was sent {_count(sent[0])} ids ({sent[0]})"
            )
    return held, None


def _owed(call: Call, rollout: Rollout) -> list[tuple[str, bool]]:
    """Each turn's prompt as owed (a fingerprint, or ``UNREPAIRABLE``) and whether it is a splice."""
    if not call.prompt_ids or len(call.prompt_ids) != len(call.prompts):
        return [(value, False) for value in call.prompts]  # nothing drifted: owed as sent
    owed: list[tuple[str, bool]] = []
    previous: list[int] | None = None
    for index, sent in enumerate(call.prompt_ids):
        prompt, spliced = list(sent), False
        if previous is not None:
            prefix = [*previous, *rollout.turns[index - 1].generation_token_ids]
            if prompt[: len(prefix)] != prefix:
                rebuilt = splice_owed(prefix, prompt)
                if rebuilt is None:
                    return owed + [(UNREPAIRABLE, True)] * (len(call.prompt_ids) - index)
                prompt, spliced = rebuilt, True
        owed.append((fingerprint(prompt), spliced))
        previous = prompt
    return owed


def _mismatch(handed: Sequence[str], owed: Sequence[tuple[str, bool]]) -> tuple[int, str, bool] | None:
    for index, (mine, (theirs, spliced)) in enumerate(zip(handed, owed, strict=True)):
        if mine != theirs:
            return index, theirs, spliced
    return None


def _count(value: str) -> str:
    length = fingerprint_length(value)
    return "?" if length is None else str(length)
