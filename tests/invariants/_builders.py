"""Hand-built Histories, rows and rollouts for the invariant tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_rollout_chaos.collector.protocol import Mode, Rollout, RolloutStatus, Turn
from pytest_rollout_chaos.history import Event, EventKind, History
from pytest_rollout_chaos.invariants.base import Observation


def rows(n: int) -> list[dict[str, Any]]:
    return [
        {"responses_create_params": {"input": [{"role": "user", "content": f"q{i}"}]}, "_rowidx": i}
        for i in range(n)
    ]


def turns(*, nan: bool = False, drift: bool = False) -> list[Turn]:
    first = Turn([1, 5, 6], [7, 8, 2], [-0.1, -0.2, float("nan") if nan else -0.3])
    second_prompt = [1, 5, 6, 7, 9, 2, 11] if drift else [1, 5, 6, 7, 8, 2, 11]
    return [first, Turn(second_prompt, [12, 2], [-0.5, -0.6])]


def rollout(index: int, status: RolloutStatus = "completed", **kwargs: Any) -> Rollout:
    return Rollout(index, status, kwargs.pop("reward", 1.0), kwargs.pop("turns", turns()), **kwargs)


def observe(
    n: int,
    rollouts: Sequence[Rollout | None] | None,
    *,
    history: History | None = None,
    raised: BaseException | None = None,
    elapsed_s: float = 1.0,
    deadline_s: float = 10.0,
    mode: Mode = "train",
    timed_out: bool = False,
) -> Observation:
    return Observation(
        rows=rows(n),
        rollouts=rollouts,
        raised=raised,
        history=history if history is not None else History(),
        deadline_s=deadline_s,
        elapsed_s=elapsed_s,
        mode=mode,
        timed_out=timed_out,
    )


def all_ok(n: int) -> list[Rollout | None]:
    return [rollout(i) for i in range(n)]


class Placed(History):
    """A History whose events sit at given times (seconds after ``t0 = 0``), as the servers' events
    files place them; ``at`` adds one."""

    def __init__(self) -> None:
        super().__init__(t0=0.0)
        self.placed: list[Event] = []

    def at(self, t: float, source: str, kind: EventKind, op: str, **data: Any) -> None:
        request_id = data.pop("request_id", None)
        self.placed.append(Event(t, source, kind, op, data, str(request_id) if request_id else None))

    def events(
        self, *, source: str | None = None, kind: str | None = None, op: str | None = None
    ) -> list[Event]:
        return [
            event
            for event in sorted(self.placed, key=lambda event: event.t)
            if (source is None or event.source == source)
            and (kind is None or event.kind == kind)
            and (op is None or event.op == op)
        ]
