"""Token-id sequences across turns: the EOS-boundary splice and the prefix check.

Multi-turn rollouts re-render the whole conversation through the chat template on every
model call. The template may tokenize an earlier assistant turn differently from how the
model generated it ("retokenization drift", NeMo RL #1337), so the trainer would train on
tokens the model never produced. Trainers' patched vLLM servers fix this by splicing: keep
the previous call's prompt + generation ids exactly, and take from the template only what
comes after the end of the last assistant turn. ``splice_prefix`` is that algorithm; the
check that prompts extend earlier turns belongs to the judge (``invariants.rules``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_rollout_chaos.errors import ChaosError


class PrefixSpliceError(ChaosError):
    """The template tokens leave no place to splice the model's own tokens in."""


def splice_prefix(
    model_prefix: Sequence[int],
    template_prefix: Sequence[int],
    template_ids: Sequence[int],
    eos_token_id: int,
) -> list[int]:
    """Return the prompt for the next call: the model's exact tokens, then the template's new turns.

    ``model_prefix`` is the previous call's prompt + generation ids (what the model saw and
    produced), ``template_prefix`` the template's rendering of the conversation up to and
    including the last assistant turn, ``template_ids`` its rendering of the whole new request.
    The cut is at the last end-of-turn (EOS) token inside the template prefix: the template
    renders the end of the last assistant turn there, and everything after it is new.
    """
    if not model_prefix:
        return list(template_ids)
    kept = list(model_prefix)
    if kept[-1] == eos_token_id:
        kept.pop()  # the template renders its own end-of-turn token; keep one, not two
    if len(template_ids) <= len(template_prefix):
        raise PrefixSpliceError(
            f"non-monotonically increasing trajectory: the new request renders to {len(template_ids)} "
            f"tokens, not more than the {len(template_prefix)} tokens of the conversation so far"
        )
    boundary = _last_index(template_ids[: len(template_prefix)], eos_token_id)
    if boundary is None:
        raise PrefixSpliceError(
            f"no end-of-turn token (id {eos_token_id}) in the first {len(template_prefix)} template "
            "tokens: the chat template does not end assistant turns with the EOS token, so there is "
            "no boundary to splice at"
        )
    return kept + list(template_ids[boundary:])


def _last_index(ids: Sequence[int], token: int) -> int | None:
    for index in range(len(ids) - 1, -1, -1):
        if ids[index] == token:
            return index
    return None
