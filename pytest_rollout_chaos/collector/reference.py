"""The reference collector: the behaviour every scenario is written against.

gym style: the agents own the loop; one ``/run`` per row through the Gym client, with bounded
concurrency. Each row's failure stays that row's (an aborted Rollout naming the root cause);
what makes the whole batch meaningless fails the collection at once: fewer results than rows
(``ShortCountError``), an agent that dropped its answer (``InfrastructureError``), too many
aborted rows (``TooManyAbortedError``), nothing left to train on (``EmptyTrainBatchError``: every
GRPO group dropped), or the collection deadline. The Gym client, like NeMo
Gym's, has no deadline and retries a dead agent forever, so every ``/run`` is awaited under
this collector's own ``request_timeout_s``: a dead, frozen or cut-off agent shows up as rows
past that deadline. There the collector asks the agent itself (``collector.outage``): one that
refuses connections is gone for good, and the collection fails at once naming it and the rows it
held, whatever share of the batch that is (an outage is infrastructure, not a share of bad rows);
one that answers keeps its stuck rows as aborted ones. Non-finite logprobs are retried for the
affected row only, a bounded number of times; prefix drift is repaired by EOS-boundary splicing
or the row is aborted with that reason. What the trainer trains on (``in_train_batch``) is every
row that did not abort, less the GRPO groups (``collector.groups``) with an aborted member: such a
group is left out whole and recorded (``group_dropped``), since its failed member's placeholder
would still shift its siblings' advantages. native style lives in ``collector.native``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from pytest_rollout_chaos.collector import native, readiness, results
from pytest_rollout_chaos.collector.failures import all_or_first_error, is_unreachable, root_cause
from pytest_rollout_chaos.collector.groups import prompt_groups
from pytest_rollout_chaos.collector.outage import Probes
from pytest_rollout_chaos.collector.prefix import SpliceError, repair_turns
from pytest_rollout_chaos.collector.protocol import (
    CollectionError,
    Collector,
    CollectorContext,
    EmptyTrainBatchError,
    InfrastructureError,
    Mode,
    Rollout,
    Row,
    ShortCountError,
    TooManyAbortedError,
    row_index,
)

SOURCE = "collector"
LIKELY_SHORT_CAUSE = "an agent server was killed (OOM?) or the Gym client dropped results"


class ReferenceCollector:
    """The built-in collector; both styles record ``collect``/``rollout``/``retry`` events."""

    honours_max_concurrency: ClassVar[bool] = (
        True  # gym style: one permit per row's /run (``concurrency_bounded``)
    )

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self._in_flight: set[int] = set()  # rows whose /run is awaited now, for errors that end the batch
        self._rows_of: dict[str, list[int]] = {}  # agent -> the rows routed to it
        self._answered: set[int] = set()  # rows whose /run brought a result
        self._collecting: asyncio.Task[Any] | None = None  # the collection's task, which late rows ask
        self._probes = Probes(ctx.gym)

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        history = self.ctx.history
        style = self.settings.style
        history.append(SOURCE, "invoke", "collect", {"rows": len(rows), "mode": mode, "style": style})
        try:
            indices = _checked_indices(rows)
            await readiness.wait_for_policy(self.ctx, history)
            try:
                async with asyncio.timeout(self.settings.collect_timeout_s):
                    if style == "native":
                        rollouts = await native.NativeLoop(self.ctx).run(rows, indices, mode)
                    else:
                        rollouts = await self._collect_gym(rows, indices)
            except TimeoutError as error:
                raise CollectionError(
                    f"collection of {len(rows)} rows did not finish within "
                    f"collect_timeout_s={self.settings.collect_timeout_s}"
                ) from error
            # what the trainer trains on: every row that did not abort; an aborted one is dropped,
            # and with it its GRPO group, whose advantage baseline it would otherwise shift
            rollouts = [replace(rollout, in_train_batch=rollout.status != "aborted") for rollout in rollouts]
            rollouts = self._drop_broken_groups(rows, rollouts)
            for rollout in rollouts:
                history.append(
                    SOURCE,
                    "info",
                    "rollout",
                    {
                        "row": rollout.row_index,
                        "status": rollout.status,
                        "error": rollout.error,
                        "attempts": rollout.attempts,
                    },
                )
            _check_aborted_share(rollouts, self.settings.max_aborted_fraction)
        except BaseException as error:
            history.append(SOURCE, "fail", "collect", {"error": root_cause(error)})
            raise
        history.append(SOURCE, "ok", "collect", {"returned": len(rollouts)})
        return rollouts

    def _drop_broken_groups(self, rows: Sequence[Row], rollouts: list[Rollout]) -> list[Rollout]:
        """Leave every group with an aborted member out of the train batch, whole: a placeholder
        kept in its group, loss-masked or not, still enters the siblings' advantage baseline. Each
        dropped group is recorded (its rows and why); its rollouts keep their own status. Where that
        leaves nothing to train on, ``EmptyTrainBatchError``."""
        by_row = {rollout.row_index: rollout for rollout in rollouts}
        for positions in prompt_groups(rows):
            members = [by_row[row_index(rows[position], position)] for position in positions]
            failed = [member for member in members if member.status == "aborted"]
            if len(members) < 2 or not failed:
                continue
            for member in members:
                by_row[member.row_index] = replace(member, in_train_batch=False)
            self.ctx.history.append(
                SOURCE,
                "info",
                "group_dropped",
                {
                    "rows": [member.row_index for member in members],
                    "failed": [member.row_index for member in failed],
                    "errors": [member.error for member in failed],
                },
            )
        kept = [by_row[rollout.row_index] for rollout in rollouts]
        _check_not_empty(kept)
        return kept

    async def _collect_gym(self, rows: Sequence[Row], indices: list[int]) -> list[Rollout]:
        limit = asyncio.Semaphore(self.settings.max_concurrency)
        self._rows_of, self._answered = {}, set()  # this collection's, not an earlier one's
        self._collecting = asyncio.current_task()
        for row, index in zip(rows, indices, strict=True):
            self._rows_of.setdefault(_agent_name(row), []).append(index)
        return await all_or_first_error(
            self._one_row(row, index, limit) for row, index in zip(rows, indices, strict=True)
        )

    async def _one_row(self, row: Row, index: int, limit: asyncio.Semaphore) -> Rollout:
        attempts = 0
        reason = ""
        while attempts < self.settings.max_logprob_attempts:
            attempts += 1
            async with _row_permit(limit):
                _start_unless_cancelled(self._collecting)
                outcome = await self._run_once(row, index)
            if isinstance(outcome, str):
                return results.aborted(index, outcome, attempts=attempts)
            try:
                turns = results.turns_from_result(outcome)
            except results.MalformedResultError as error:
                return results.aborted(index, f"malformed /run result: {error}", attempts=attempts)
            bad = results.bad_logprob(turns)
            if bad is not None:
                reason = bad
                self.ctx.history.append(
                    SOURCE, "info", "retry", {"row": index, "attempt": attempts, "reason": bad}
                )
                continue
            try:
                repaired = repair_turns(turns, self.ctx.eos_token_ids)
            except SpliceError as error:
                return results.aborted(index, str(error), attempts=attempts, turns=turns)
            if repaired != turns:
                drift = results.prefix_mismatch(turns)
                self.ctx.history.append(SOURCE, "info", "prefix_repair", {"row": index, "drift": drift})
            return results.rollout_from_result(index, outcome, attempts=attempts, turns=repaired)
        return results.aborted(
            index,
            f"{reason} (still after {attempts} attempts; logprobs never became finite)",
            attempts=attempts,
        )

    async def _run_once(self, row: Row, index: int) -> dict[str, Any] | str:
        """The ``/run`` result, or the root cause why this row failed; raise for batch failures."""
        awaitables = list(self.ctx.gym.run_examples([row]))
        if not awaitables:
            raise ShortCountError(
                f"requested 1 result for row {index} but the Gym client returned 0 "
                f"(requested vs returned differ; likely cause: {LIKELY_SHORT_CAUSE})"
            )
        for extra in awaitables[1:]:
            _discard(extra)
        timeout_s = self.settings.request_timeout_s
        self._in_flight.add(index)
        try:
            async with asyncio.timeout(timeout_s):
                got_row, result = await awaitables[0]
        except TimeoutError:
            why = await self._probes.gone(_agent_name(row))
            if why is not None:
                raise self._outage(row, index, why) from None
            return (
                f"no /run result for row {index} from agent {self._agent_of(row)} within "
                f"request_timeout_s={timeout_s} "
                "(agent dead, hung or unreachable; the Gym client waits and retries without limit)"
            )
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the collection itself is being cancelled
            return f"row {index}: {root_cause(asyncio.CancelledError())}"
        except Exception as error:
            if is_unreachable(error):
                raise InfrastructureError(
                    f"agent {self._agent_of(row)} unreachable while running row {index}: "
                    f"{root_cause(error)}; rows in flight: {sorted(self._in_flight)}; "
                    "failing fast instead of retrying a dead server"
                ) from error
            return root_cause(error)
        finally:
            self._in_flight.discard(index)
        self._answered.add(index)
        got_index = got_row.get("_rowidx") if isinstance(got_row, dict) else None
        if got_index is not None and got_index != index:
            return f"the Gym client answered row {index} with the result of row {got_index}"
        return result

    def _outage(self, row: Row, index: int, why: str) -> InfrastructureError:
        """The error that ends the collection when a row's agent is gone: the agent, and its rows."""
        agent = _agent_name(row)
        lost = [other for other in self._rows_of.get(agent, [index]) if other not in self._answered]
        return InfrastructureError(
            f"agent {self._agent_of(row)} is gone: no /run result for row {index} within "
            f"request_timeout_s={self.settings.request_timeout_s}, and the agent refuses connections "
            f"({why}); the rows routed to it that have no result cannot complete: rows {lost}. "
            "A server down for the rest of the collection is an outage, not a share of bad rows, "
            "so the collection fails"
        )

    def _agent_of(self, row: Row) -> str:
        """``'calculator_agent'``, with the node it runs on when the stack says (``on node 1 (...)``)."""
        ref = row.get("agent_ref")
        name = str(ref.get("name")) if isinstance(ref, dict) else "?"
        node = self.ctx.placement.get(name)
        return f"{name!r} on {node}" if node else repr(name)


def _agent_name(row: Row) -> str:
    ref = row.get("agent_ref")
    return str(ref.get("name")) if isinstance(ref, dict) else "?"


def factory(ctx: CollectorContext) -> Collector:
    """``--rollout-chaos-target=reference``."""
    return ReferenceCollector(ctx)


def _checked_indices(rows: Sequence[Row]) -> list[int]:
    indices = [row_index(row, position) for position, row in enumerate(rows)]
    repeated = sorted(index for index, count in Counter(indices).items() if count > 1)
    if repeated:
        raise ValueError(f"rows repeat _rowidx values {repeated}; each row needs its own _rowidx")
    return indices


def _check_aborted_share(rollouts: Sequence[Rollout], bound: float) -> None:
    failed = [rollout for rollout in rollouts if rollout.status == "aborted"]
    if rollouts and len(failed) / len(rollouts) > bound:
        raise TooManyAbortedError(
            f"{len(failed)} of {len(rollouts)} rollouts aborted "
            f"(rows {sorted(rollout.row_index for rollout in failed)}), "
            f"above max_aborted_fraction={bound}: {_causes(failed)}"
        )


def _check_not_empty(rollouts: Sequence[Rollout]) -> None:
    """Rollouts that did not abort, yet each in a group left out whole: the step has nothing to
    train on (an all-aborted batch is the aborted share's to judge)."""
    failed = [rollout for rollout in rollouts if rollout.status == "aborted"]
    if len(failed) < len(rollouts) and not any(rollout.in_train_batch for rollout in rollouts):
        raise EmptyTrainBatchError(
            f"nothing to train on: every GRPO group has an aborted member (rows "
            f"{sorted(rollout.row_index for rollout in failed)}) and is left out whole, so the "
            f"{len(rollouts) - len(failed)} rollouts that did not abort are too: {_causes(failed)}"
        )


def _causes(failed: Sequence[Rollout]) -> str:
    """The three commonest reasons the rows aborted, with how often each."""
    reasons = Counter(rollout.error or "?" for rollout in failed).most_common(3)
    return "; ".join(f"{count}x {reason}" for reason, count in reasons)


def _discard(awaitable: object) -> None:
    if asyncio.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()


def _start_unless_cancelled(collecting: asyncio.Task[Any] | None) -> None:
    """A row whose permit came free as the collection was being cancelled starts no ``/run``: it may
    run before the cancellation reaches it (both woken in one turn of the loop), so it asks the
    collection's task, which knows at once (``cancel_honoured``)."""
    if collecting is not None and collecting.cancelling():
        raise asyncio.CancelledError


@contextlib.asynccontextmanager
async def _row_permit(limit: asyncio.Semaphore) -> AsyncIterator[None]:
    """One row's permit, given back when its ``/run`` ends; kept on a short count, where the Gym client
    started the row's ``/run`` and handed back nothing to await: the request may still be running,
    and the failing batch must not start a sibling in its place (``concurrency_bounded``)."""
    await limit.acquire()
    try:
        yield
    except ShortCountError:
        raise
    except BaseException:
        limit.release()
        raise
    limit.release()
