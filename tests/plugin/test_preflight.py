"""Misconfiguration is one usage error at session start, saying what was tried and what to install
or pass, never a traceback per scenario: a model directory the backend cannot load, NeMo Gym without
an interpreter that imports it, a Toxiproxy mode that cannot be had, a target that is not a factory."""

from __future__ import annotations

import importlib.util
import socket
import sys
import tempfile
from pathlib import Path

import pytest

SCENARIO = """\
name: {name}
description: Nothing but a baseline.
expect:
  invariants: [accounted]
  witness: {{rows_answered: 1}}
"""


def _project(pytester: pytest.Pytester) -> None:
    # Two scenarios: a check that failed per scenario would show up twice.
    for name in ("first", "second"):
        pytester.makefile(".chaos.yaml", **{name: SCENARIO.format(name=name)})


def _usage_error(result: pytest.RunResult, *expected: str) -> None:
    """Exit 4, the message once, no traceback, no scenario run."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: " + expected[0], *expected[1:]])
    text = result.stdout.str() + result.stderr.str()
    assert text.count(expected[0].strip("*")[:40]) == 1
    assert "Traceback" not in text
    result.stdout.no_fnmatch_line("*::first*")


def test_a_model_directory_the_tiny_backend_cannot_load(pytester: pytest.Pytester) -> None:
    _project(pytester)
    model = pytester.mkdir("half-model")
    (model / "config.json").write_text('{"model_type": "llama"}')
    result = pytester.runpytest("--rollout-chaos", f"--rollout-chaos-model={model}")
    _usage_error(
        result,
        f"--rollout-chaos-model={model}: the tiny backend needs config.json, model.safetensors, "
        "tokenizer.json, tokenizer_config.json; missing: model.safetensors, tokenizer.json, "
        "tokenizer_config.json (or serve it with --rollout-chaos-backend=vllm)",
    )


def test_a_model_directory_without_config_json(pytester: pytest.Pytester) -> None:
    _project(pytester)
    model = pytester.mkdir("empty-model")
    result = pytester.runpytest("--rollout-chaos", f"--rollout-chaos-model={model}")
    _usage_error(
        result, f"--rollout-chaos-model={model}: no config.json there; pass a model directory in*layout"
    )


@pytest.mark.skipif(importlib.util.find_spec("nemo_gym") is not None, reason="this interpreter has nemo_gym")
def test_nemo_gym_without_an_interpreter_that_imports_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ROLLOUT_CHAOS_GYM_PYTHON", raising=False)
    _project(pytester)
    result = pytester.runpytest(
        "--rollout-chaos", "--rollout-chaos-gym=nemo-gym", f"--rollout-chaos-gym-python={sys.executable}"
    )
    _usage_error(
        result,
        f"--rollout-chaos-gym=nemo-gym: --rollout-chaos-gym-python: '{sys.executable}' cannot run NeMo Gym: "
        "'import nemo_gym' failed*pip install nemo-gym==*--rollout-chaos-gym-python=V/bin/python*",
    )


@pytest.mark.skipif(importlib.util.find_spec("nemo_gym") is not None, reason="this interpreter has nemo_gym")
def test_the_nemo_gym_target_without_an_interpreter_that_imports_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ROLLOUT_CHAOS_GYM_PYTHON", raising=False)
    _project(pytester)
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-target=nemo_gym")
    _usage_error(
        result,
        "--rollout-chaos-target=nemo_gym: real NeMo Gym needs an interpreter that can import nemo_gym; "
        f"none was configured and the current one ({sys.executable}) cannot import it.*pip install "
        "nemo-gym==*then pass --rollout-chaos-gym-python=V/bin/python "
        "(or set ROLLOUT_CHAOS_GYM_PYTHON=V/bin/python)",
    )


def test_binary_toxiproxy_without_the_binary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    monkeypatch.setenv("PATH", str(pytester.mkdir("bin-without-toxiproxy")))
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-toxiproxy=binary")
    _usage_error(
        result,
        "--rollout-chaos-toxiproxy=binary: toxiproxy-server is not on PATH "
        "(searched *bin-without-toxiproxy); install toxiproxy-server from https://github.com/Shopify/*",
    )


def test_hosts_without_the_tools_for_namespaces(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    monkeypatch.setenv("PATH", str(pytester.mkdir("bin-without-ip")))
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-ray=hosts:3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--rollout-chaos-ray=hosts:3: each host is a Linux network, PID and mount namespace this run "
            "creates, and this machine lacks *`ip` (iproute2) on PATH; `unshare` (util-linux) on PATH "
            "(local:N runs the nodes without them)"
        ]
    )
    result.stdout.no_fnmatch_line("*::first*")


def test_hosts_that_would_not_see_a_model_under_tmp(pytester: pytest.Pytester) -> None:
    _project(pytester)
    model = Path(tempfile.mkdtemp(prefix="rc-model-", dir="/tmp"))  # /tmp itself, whatever the basetemp
    try:
        result = pytester.runpytest(
            "--rollout-chaos", "--rollout-chaos-ray=hosts:2", f"--rollout-chaos-model={model}"
        )
    finally:
        model.rmdir()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--rollout-chaos-ray=hosts:2: each host gets a private /tmp and /dev/shm (empty tmpfs mounts), "
            "so the hosts cannot see what lives there on this machine, and these paths they read are there:",
            f"  --rollout-chaos-model={model} is under /tmp",
            "move them out of /tmp and /dev/shm (a checkout, a virtualenv or a model elsewhere; pass the new "
            "paths), or run the nodes with --rollout-chaos-ray=local:N, which share this machine's files",
        ]
    )
    result.stdout.no_fnmatch_line("*::first*")


def test_docker_toxiproxy_without_an_engine(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-docker.sock")
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-toxiproxy=docker")
    _usage_error(
        result,
        "--rollout-chaos-toxiproxy=docker: no Docker engine answers (no socket at *no-docker.sock); "
        "start Docker or set DOCKER_HOST*",
    )


def test_a_toxiproxy_url_nobody_answers_at(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    with socket.socket() as sock:  # a port the OS just gave out and nobody listens on now
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result = pytester.runpytest("--rollout-chaos", f"--rollout-chaos-toxiproxy={url}")
    _usage_error(result, f"--rollout-chaos-toxiproxy={url}: no Toxiproxy API answers at {url}*")
    monkeypatch.setenv("TOXIPROXY_URL", url)
    auto = pytester.runpytest("--rollout-chaos")
    _usage_error(auto, f"$TOXIPROXY_URL (used by mode auto): no Toxiproxy API answers at {url}*")


def test_every_problem_is_listed_in_the_one_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    monkeypatch.setenv("PATH", str(pytester.mkdir("bin")))
    model = pytester.mkdir("no-model")
    result = pytester.runpytest(
        "--rollout-chaos", f"--rollout-chaos-model={model}", "--rollout-chaos-toxiproxy=binary"
    )
    _usage_error(
        result,
        f"--rollout-chaos-model={model}: no config.json there*",
        "--rollout-chaos-toxiproxy=binary: toxiproxy-server is not on PATH*",
    )


COLLECTORS = """
class NoCollect:
    def __init__(self, ctx):
        self.ctx = ctx


async def collect(rows, *, mode):
    return []
"""


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("my_collectors:collect", "*'collect' is an async function; the target is the factory that builds*"),
        ("my_collectors:NoCollect", "*class 'NoCollect' has no collect method*"),
        ("my_collectors:missing", "*module 'my_collectors' has no attribute 'missing'*NoCollect, collect*"),
    ],
)
def test_a_target_that_is_not_a_factory(pytester: pytest.Pytester, target: str, expected: str) -> None:
    _project(pytester)
    pytester.makepyfile(my_collectors=COLLECTORS)
    pytester.syspathinsert()
    result = pytester.runpytest("--rollout-chaos", f"--rollout-chaos-target={target}")
    _usage_error(result, f"--rollout-chaos-target: target '{target}'{expected}")


def test_the_bundled_defaults_pass_the_checks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-toxiproxy=embedded")
    result.assert_outcomes(passed=1)
    assert Path(pytester.path).is_dir()
