"""The optional extras: the parts that need one say which to install when it is missing, and
``--rollout-chaos-toxiproxy=auto`` does without the Docker SDK. A missing package is simulated
with ``sys.modules[name] = None``, which makes both ``import`` and ``find_spec`` see none."""

from __future__ import annotations

import importlib
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rollout_chaos import extras, preflight
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.servers.toxiproxy.controller import ToxiproxyServer, start_toxiproxy
from pytest_rollout_chaos.servers.toxiproxy.handle import ChaosToxiproxy
from pytest_rollout_chaos.settings import ChaosSettings

STRATEGIES = "pytest_rollout_chaos.scenario.strategies"


def _missing(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)


@pytest.fixture
def docker_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A Docker engine as far as ``GET /_ping`` goes: a unix socket that answers 200 OK."""
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.recv(1024)
                connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nOK")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    monkeypatch.delenv("TOXIPROXY_URL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    yield
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_the_error_names_what_needed_it_and_the_install_line() -> None:
    error = extras.MissingExtraError(extras.FUZZ, "the thing")
    assert str(error) == (
        "the thing needs hypothesis (import 'hypothesis'), which is not installed: "
        "pip install 'pytest-rollout-chaos[fuzz]'"
    )
    assert isinstance(error, ImportError)
    assert error.name == "hypothesis"


def test_the_strategies_without_hypothesis(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, "hypothesis")
    monkeypatch.delitem(sys.modules, STRATEGIES, raising=False)
    with pytest.raises(extras.MissingExtraError, match=r"\[fuzz\]'$") as caught:
        importlib.import_module(STRATEGIES)
    assert str(caught.value).startswith(f"{STRATEGIES} needs hypothesis")


def test_toxiproxy_python_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, "toxiproxy")
    handle = ChaosToxiproxy(ToxiproxyServer("url", "http://127.0.0.1:1", lambda: None))
    with pytest.raises(extras.MissingExtraError, match=r"pip install 'pytest-rollout-chaos\[toxiproxy\]'"):
        handle.toxiproxy_python()


@pytest.mark.usefixtures("docker_engine")
def test_docker_mode_without_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, "docker")
    needs = r"^--rollout-chaos-toxiproxy=docker needs docker .*\[docker\]"
    with pytest.raises(extras.MissingExtraError, match=needs):
        start_toxiproxy("docker", harness_start=_no_start, seed=0)
    problem = preflight.toxiproxy_problem(ChaosSettings(toxiproxy="docker"))
    assert problem == (
        "--rollout-chaos-toxiproxy=docker: the Docker SDK (the docker package) is not installed here; "
        "pip install 'pytest-rollout-chaos[docker]'"
    )


@pytest.mark.usefixtures("docker_engine")
def test_auto_without_the_sdk_is_embedded_even_with_an_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _missing(monkeypatch, "docker")
    started: list[ManagedProcess] = []

    def start(spec: ServerSpec) -> ManagedProcess:
        process = ManagedProcess(spec, tmp_path / "logs")
        started.append(process)
        process.start()
        return process

    server = start_toxiproxy("auto", harness_start=start, seed=0)
    try:
        assert server.kind == "embedded"
    finally:
        server.stop()
        for process in started:
            process.stop()
    assert preflight.toxiproxy_problem(ChaosSettings(toxiproxy="auto")) is None


def _no_start(spec: ServerSpec) -> ManagedProcess:
    raise AssertionError(f"nothing should start, not {spec.name}")
