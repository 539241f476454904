"""``RunInfo``: which run a report is about: settings, versions, command line, and where the logs are.

The settings half is known when the session starts; the environment half (the Toxiproxy in
use and its URL, the vLLM or NeMo Gym interpreter, each server's log file) is learned as the
fixtures start servers, in each pytest-xdist worker, and is merged into one ``RunInfo``.
Versions are read from package metadata, never by importing the packages (torch is heavy).
"""

from __future__ import annotations

import datetime
import platform
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_rollout_chaos.collector.adapters import gym_client

if TYPE_CHECKING:
    import pytest

    from pytest_rollout_chaos.settings import ChaosSettings

PROJECT = "pytest-rollout-chaos"
NOT_INSTALLED = "not installed"
TOXIPROXY_LINE = "toxiproxy: "  # how the toxiproxy fixture describes the one in use


@dataclass(frozen=True, slots=True)
class ServerLog:
    """One server's log file, and the xdist worker whose server it was ("" without xdist)."""

    name: str
    path: str
    worker: str = ""


@dataclass(slots=True)
class RunInfo:
    """The facts a report names at its top, so that a page found later says what it is about."""

    target: str = "reference"
    gym_client: str = ""  # what plays NeMo Gym's client for the target (``adapters.gym_client``)
    seed: int = 0
    backend: str = "tiny"
    model: str = ""
    gym: str = "embedded"
    toxiproxy_mode: str = "auto"
    command: str = ""
    started: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    environment: list[str] = field(default_factory=list)  # "toxiproxy: embedded at http://..."
    logs: list[ServerLog] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. a worker that went down

    def add_environment(self, lines: list[str]) -> None:
        """Add lines not seen yet (every xdist worker reports the same backends)."""
        for line in lines:
            if line not in self.environment:
                self.environment.append(line)

    @property
    def toxiproxy(self) -> str:
        """The Toxiproxy actually used ("embedded at http://..."), or the mode when none started."""
        # "gw0: toxiproxy: embedded at URL" -> "gw0: embedded at URL"
        used = [
            "".join(line.partition(TOXIPROXY_LINE)[::2])
            for line in self.environment
            if TOXIPROXY_LINE in line
        ]
        return "; ".join(used) if used else f"{self.toxiproxy_mode} (not started)"


def describe_run(config: pytest.Config, settings: ChaosSettings) -> RunInfo:
    """The run's settings, versions and command line, from ``config`` and the resolved settings."""
    info = run_facts(settings, command=["pytest", *config.invocation_params.args])
    if getattr(config.option, "numprocesses", None):
        info.versions["pytest-xdist"] = _version("pytest-xdist")
    return info


def run_facts(settings: ChaosSettings, *, command: Sequence[str]) -> RunInfo:
    """The run's settings, versions and ``command``, whichever runner ran it."""
    versions = {PROJECT: _version(PROJECT), "Python": platform.python_version(), "pytest": _version("pytest")}
    versions["torch"] = _version("torch")
    # vLLM and NeMo Gym usually live in interpreters of their own: the environment lines name
    # the versions that served; this one's are added only where it has them.
    if settings.backend == "vllm" and (vllm := _version("vllm")) != NOT_INSTALLED:
        versions["vLLM"] = vllm
    if settings.gym == "nemo-gym" and (nemo_gym := _version("nemo-gym")) != NOT_INSTALLED:
        versions["NeMo Gym"] = nemo_gym
    return RunInfo(
        target=settings.target,
        gym_client=gym_client(settings.target),
        seed=settings.seed,
        backend=f"external policy at {settings.policy_url}," if settings.policy_url else settings.backend,
        model=f"{settings.model_id} ({settings.model})" if settings.model_id else str(settings.model),
        gym=settings.gym,
        toxiproxy_mode=settings.toxiproxy,
        command=shlex.join(command),
        started=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        versions=versions,
    )


def log_href(log: ServerLog, report: Path | None) -> str:
    """A link to ``log`` from the report's folder: relative when both lie under one root, else file:."""
    path = Path(log.path)
    if report is None:
        return path.as_uri()
    try:
        return path.relative_to(report.parent.resolve()).as_posix()
    except ValueError:
        return path.as_uri()


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return NOT_INSTALLED
