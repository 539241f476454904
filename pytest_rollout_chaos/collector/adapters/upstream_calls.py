"""What an adapter ran of its trainer's code: each upstream call, how it ended, what it stood in for.

An adapter records each call into the trainer's code as a collector ``invoke`` whose data name
the ``call`` (the function, or the span of the trainer's code, that ran for real) and list in
``stood_in`` what the adapter stands in for on the way; then an ``ok`` or a ``fail`` with the same
op and ``call``. Most such invokes have op ``upstream``; one with another op (SkyRL's
``generate``, verl's ``generate_sequences``) counts when it carries ``stood_in``. The call whose
output the Rollouts were read from also carries ``read_out``: that point of the trainer's path.
Which NeMo Gym client ran is an ``info`` event with a ``client`` key.

``recorded`` reads the calls back and ``summary`` turns them into the plain data the reports
show; a collector that is no adapter records none, and its summary is empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from pytest_rollout_chaos.history import Event, History

SOURCE: Final = "collector"
OP: Final = "upstream"
STOOD_IN: Final = "stood_in"
READ_OUT: Final = "read_out"
CLIENT: Final = "client"
Outcome = Literal["ok", "fail", "open"]


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    """One call into the trainer's code: what ran, how it ended (``open``: no end recorded, as
    when the run was cut short), what was stood in for, and the read-out point if it is one."""

    call: str
    outcome: Outcome
    stood_in: tuple[str, ...] = ()
    read_out: str = ""
    error: str = ""

    def to_data(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "outcome": self.outcome,
            "stood_in": list(self.stood_in),
            "read_out": self.read_out,
            "error": self.error,
        }


def recorded(history: History) -> list[UpstreamCall]:
    """Every upstream call in ``history``, in the order they began, each with its own end."""
    calls: list[tuple[Event, Event | None]] = []
    for event in history.events(source=SOURCE):
        if event.kind == "invoke" and _is_call(event):
            calls.append((event, None))
        elif event.kind in ("ok", "fail"):
            for position, (began, ended) in enumerate(calls):
                if (
                    ended is None
                    and began.op == event.op
                    and began.data.get("call") == event.data.get("call")
                ):
                    calls[position] = (began, event)
                    break
    return [_call(began, ended) for began, ended in calls]


def gym_clients(history: History) -> list[str]:
    """Which NeMo Gym client each collection ran (NeMo Gym's own, or the stand-in), once each."""
    seen: dict[str, None] = {}
    for event in history.events(source=SOURCE, kind="info"):
        if CLIENT in event.data:
            version = event.data.get("nemo_gym")
            seen[f"{event.data[CLIENT]}{f' (nemo_gym {version})' if version else ''}"] = None
    return list(seen)


def summary(history: History) -> dict[str, Any]:
    """What the reports show of an adapter's run: the read-out point (the last call naming one),
    every call with its outcome and stand-ins, the stand-ins once each in order, and the Gym
    client; ``{}`` where nothing upstream was recorded."""
    calls = recorded(history)
    clients = gym_clients(history)
    if not calls and not clients:
        return {}
    read_out = next((call.read_out for call in reversed(calls) if call.read_out), "")
    stood_in = dict.fromkeys(line for call in calls for line in call.stood_in)
    return {
        "read_out": read_out,
        "calls": [call.to_data() for call in calls],
        "stood_in": list(stood_in),
        "gym_clients": clients,
    }


def _is_call(event: Event) -> bool:
    return "call" in event.data and (event.op == OP or STOOD_IN in event.data)


def _call(began: Event, ended: Event | None) -> UpstreamCall:
    outcome: Outcome = "open" if ended is None else "ok" if ended.kind == "ok" else "fail"
    return UpstreamCall(
        call=str(began.data["call"]),
        outcome=outcome,
        stood_in=tuple(str(line) for line in began.data.get(STOOD_IN) or ()),
        read_out=str(began.data.get(READ_OUT) or ""),
        error="" if ended is None else str(ended.data.get("error") or ""),
    )
