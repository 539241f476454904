"""The servers' log tails a failure's report shows: whose, and which of their lines.

Every server writes one log for the whole session. Showing each one's tail with every failure
buries the story under lines that have nothing to do with it, so by default
(``--rollout-chaos-logs=implicated``) a failure shows the tails of the servers its story
implicates: those its failing verdicts' evidence names, those its fault schedule acts on (both
ends of a link, with Toxiproxy for a network fault and the fault layer for one of its rules), and
any that exited. The embedded Toxiproxy and the fault layer log each connection at INFO; their
tails keep the rest (warnings, errors, tracebacks). ``all`` shows every server's tail as it is
written, ``none`` none; a last section names the servers left out and where every log is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.base import Need
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.servers.faultlayer.spec import NAME as FAULT_LAYER
from pytest_rollout_chaos.servers.toxiproxy.spec import BINARY_NAME, EMBEDDED_NAME

if TYPE_CHECKING:
    from pytest_rollout_chaos.engine.result import ScenarioResult
    from pytest_rollout_chaos.history import Event
    from pytest_rollout_chaos.settings import LogsMode

LOG_SECTION_LINES: Final = 20
# The servers whose INFO lines are routine (a line per connection, proxy and reset), left out.
QUIET_INFO: Final = frozenset({EMBEDDED_NAME, FAULT_LAYER})
_ROUTINE: Final = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?:DEBUG|INFO) ")
_FAILING: Final = (Status.FAIL, Status.UNKNOWN)


class LoggedProcess(Protocol):
    """What this module reads of a server process (``servers.process.ManagedProcess``)."""

    @property
    def name(self) -> str: ...

    @property
    def log_path(self) -> Path: ...

    def is_running(self) -> bool: ...


def sections(
    mode: LogsMode, processes: Sequence[LoggedProcess], result: ScenarioResult | None, *, when: str
) -> list[tuple[str, str]]:
    """The report sections of a failure in phase ``when``: ``(title, text)`` per server shown, then
    one naming those left out and where the logs are (none when every server's tail is shown)."""
    if mode == "all":
        shown = list(processes)
    elif mode == "none":
        shown = []
    else:
        names = implicated(processes, result)
        shown = [process for process in processes if process.name in names]
    found = [
        (f"{when} {process.name} log (last {LOG_SECTION_LINES} lines)", tail(process, quiet=mode != "all"))
        for process in shown
    ]
    left_out = [process.name for process in processes if process not in shown]
    if left_out:
        folders = ", ".join(sorted({str(process.log_path.parent) for process in processes}))
        found.append(
            (
                f"{when} server logs",
                f"not shown (--rollout-chaos-logs=all shows them): {', '.join(left_out)}; "
                f"every server's log is in {folders}",
            )
        )
    return found


def implicated(processes: Sequence[LoggedProcess], result: ScenarioResult | None) -> set[str]:
    """The names of the processes a failure implicates: see the module docstring. Without a
    scenario's result (a Python test), those that are not running."""
    names = {process.name for process in processes if not process.is_running()}
    if result is None:
        return names
    servers = result.servers

    def add(name: str) -> None:
        names.update(servers.get(name, (name,)))

    for step in result.scenario.faults:
        for end in _ends(step.target):
            add(end)
        names.update(_carriers(step.kind))
    for event in _evidence(result):
        named = servers.get(_named_by(event), (_named_by(event),))
        if len(named) == 1:  # an event from ``agent`` with no server named names none of them
            names.update(named)
    for event in result.history.events(source="process", op="exit"):
        add(str(event.data.get("server", "")))
    return names


def tail(process: LoggedProcess, *, quiet: bool = True) -> str:
    """The last lines of ``process``'s log; ``quiet``: without routine INFO lines where it has them."""
    try:
        lines = process.log_path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no log written)"
    if quiet and process.name in QUIET_INFO:
        lines = [line for line in lines if not _ROUTINE.match(line)]
    return "\n".join(lines[-LOG_SECTION_LINES:]) or "(log is empty)"


def _ends(target: str) -> Iterator[str]:
    """The servers a fault target names: itself, or each end of a link (``collector->agent:NAME``'s
    agent instance by its name)."""
    for end in target.split("->"):
        yield end.rpartition(":")[2]


def _carriers(kind: str) -> tuple[str, ...]:
    """The servers a fault acts through: Toxiproxy for a network fault, the fault layer for a rule."""
    cls = registry.FAULTS.get(kind)  # a scenario's kinds are known: it was checked when read
    needs = cls.needs if cls is not None else ()
    return (
        *((EMBEDDED_NAME, BINARY_NAME) if Need.LINK in needs else ()),
        *((FAULT_LAYER,) if Need.FAULT_LAYER in needs else ()),
    )


def _evidence(result: ScenarioResult) -> Iterable[Event]:
    """The History's events that failing verdicts give as evidence (each line is an event's)."""
    lines = {line for verdict in result.verdicts if verdict.status in _FAILING for line in verdict.evidence}
    if not lines:
        return []
    t0 = result.history.t0
    return [event for event in result.history.events() if event.describe(t0) in lines]


def _named_by(event: Event) -> str:
    """The server an event is about: the server it names, else the one that recorded it."""
    return str(event.data.get("server") or event.source)
