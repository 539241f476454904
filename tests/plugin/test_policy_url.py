"""``--rollout-chaos-policy-url``: the option and its ini twin, and one usage error at session start
for a URL that is malformed, that nothing answers, or whose server never becomes ready.

The servers here are small ``http.server`` handlers written in this file, run on a thread of the
test process for as long as one test needs them.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from pytest_rollout_chaos import options
from pytest_rollout_chaos import settings as s
from tests.conftest import INNER_ASYNCIO_INI

SHORT_READY = f"{s.INI_POLICY_READY_TIMEOUT}=1"
SERVER_STOP_S = 5.0
POLICY_TESTS = """
import pytest

@pytest.mark.parametrize("n", range(3))
def test_policy(chaos_policy, n):
    pass
"""
SCENARIO = """
name: tiny
description: one echo row
workload: {rows_per_task: 1, tasks: [echo]}
expect: {invariants: [accounted], within_s: 30, witness: {rows_answered: 1}}
"""


class _Answers(BaseHTTPRequestHandler):
    """``GET`` answers from the class's ``routes``: path -> (status, JSON body); 404 otherwise."""

    routes: ClassVar[dict[str, tuple[int, object]]] = {}

    def do_GET(self) -> None:
        status, body = self.routes.get(self.path, (404, {"detail": "Not Found"}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(routes: dict[str, tuple[int, object]]) -> Iterator[str]:
    """A loopback server answering ``routes``, on a thread; its root URL. Stopped on every path."""
    handler = type("Routes", (_Answers,), {"routes": routes})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(SERVER_STOP_S)


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port that is bound (so nobody else takes it) but not listening: connects are refused."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


def _models(*ids: str) -> tuple[int, object]:
    return 200, {"object": "list", "data": [{"id": model, "object": "model"} for model in ids]}


def _one_usage_error(result: pytest.RunResult) -> str:
    """The single ``ERROR:`` line of a usage error, after checking nothing ran and nothing crashed."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.outlines + result.errlines
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stdout.no_fnmatch_line("*test_policy*")
    return errors[0]


# -- the option ---------------------------------------------------------------------------------
def test_option_ini_twin_and_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--rollout-chaos-policy-url=URL*", f"*{s.OPT_POLICY_URL} (*"])
    result.stdout.fnmatch_lines([f"*{s.INI_POLICY_READY_TIMEOUT} (*"])
    help_text = " ".join(result.stdout.str().split())
    assert "with or without a trailing /v1" in help_text


@pytest.mark.parametrize(
    ("given", "root"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000"),
        ("http://localhost:30000/", "http://localhost:30000"),
        ("https://gpu-box.example/v1", "https://gpu-box.example:443"),
        ("http://[::1]:8000/v1", "http://[::1]:8000"),
    ],
)
def test_url_with_or_without_v1(pytester: pytest.Pytester, given: str, root: str) -> None:
    settings = options.resolve(pytester.parseconfigure(f"--rollout-chaos-policy-url={given}"))
    assert settings.policy_url == root
    assert settings.policy_ready_timeout_s == s.DEFAULT_POLICY_READY_TIMEOUT_S


def test_ini_twin_option_precedence_and_header(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        f"[pytest]\n{s.OPT_POLICY_URL} = http://10.0.0.7:8000/v1\n"
        f"{s.INI_POLICY_READY_TIMEOUT} = 300\n{INNER_ASYNCIO_INI}"
    )
    settings = options.resolve(pytester.parseconfigure())
    assert settings.policy_url == "http://10.0.0.7:8000"
    assert settings.policy_ready_timeout_s == 300.0
    assert "policy=http://10.0.0.7:8000 (external)" in settings.header_line()
    assert "backend=" not in settings.header_line()
    option = options.resolve(pytester.parseconfigure("--rollout-chaos-policy-url=http://127.0.0.1:9000"))
    assert option.policy_url == "http://127.0.0.1:9000"
    assert options.resolve(pytester.parseconfigure(f"-o{s.OPT_POLICY_URL}=")).policy_url is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("127.0.0.1:8000", "there is no scheme"),
        ("gpu-box:8000", "the scheme must be http or https, not 'gpu-box'"),
        ("ftp://127.0.0.1:8000", "the scheme must be http or https, not 'ftp'"),
        ("http://:8000/v1", "there is no host"),
        ("http://127.0.0.1:eighty", "the port of '127.0.0.1:eighty' is not a number from 1 to 65535"),
        ("http://127.0.0.1:0", "port 0 names no server"),
        ("http://127.0.0.1:8000/api/v2", "the path '/api/v2' is neither empty nor /v1"),
        ("http://user:secret@127.0.0.1:8000", "credentials, a query or a fragment cannot be used"),
    ],
)
def test_bad_url_is_a_usage_error(pytester: pytest.Pytester, value: str, why: str) -> None:
    result = pytester.runpytest("--rollout-chaos", f"--rollout-chaos-policy-url={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --rollout-chaos-policy-url: invalid value {value!r}: {why} (valid: an http:// or https://*/v1*)"
        ]
    )


def test_bad_ini_values_name_the_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makeini(f"[pytest]\n{s.OPT_POLICY_URL} = gpu-box:8000\n{INNER_ASYNCIO_INI}")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: ini option '{s.OPT_POLICY_URL}' (twin of --rollout-chaos-policy-url): invalid value*"]
    )
    result = pytester.runpytest(f"-o{s.INI_POLICY_READY_TIMEOUT}=soon", f"-o{s.OPT_POLICY_URL}=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: ini option '{s.INI_POLICY_READY_TIMEOUT}': invalid value 'soon' (valid: seconds > 0*"]
    )


# -- readiness at session start -------------------------------------------------------------------
def test_nothing_listening_is_one_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_policy=POLICY_TESTS)
    pytester.makefile(".chaos.yaml", tiny=SCENARIO)
    with refusing_port() as port:
        started = time.monotonic()
        result = pytester.runpytest(
            "--rollout-chaos", f"--rollout-chaos-policy-url=http://127.0.0.1:{port}/v1", "-o", SHORT_READY
        )
        took_s = time.monotonic() - started
    _one_usage_error(result)
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --rollout-chaos-policy-url=http://127.0.0.1:{port}: nothing answered at "
            f"http://127.0.0.1:{port} within 1.?s (limit 1s; tried GET /health, then GET /v1/models, "
            "* times; last: GET /health: ConnectionRefusedError: *); start the server first and pass the "
            "URL it listens on (such as --rollout-chaos-policy-url=http://127.0.0.1:8000/v1); *"
            f"-o {s.INI_POLICY_READY_TIMEOUT}=SECONDS"
        ]
    )
    assert took_s < 20, f"one deadline of 1s, yet the run took {took_s:.1f}s"


def test_a_server_that_never_becomes_ready_is_one_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_policy=POLICY_TESTS)
    loading = {"/health": (503, {"error": "the engine is still loading"}), "/v1/models": _models("m")}
    with serving(loading) as url:
        result = pytester.runpytest("--rollout-chaos", f"--rollout-chaos-policy-url={url}", "-o", SHORT_READY)
    _one_usage_error(result)
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --rollout-chaos-policy-url={url}: the server at {url} was not ready within 1.?s "
            "(limit 1s; tried GET /health, then GET /v1/models, * times; last: GET /health answered 503: "
            """'{"error": "the engine is still loading"}'); start the server first*"""
        ]
    )


def test_a_server_listing_no_model_is_one_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_policy=POLICY_TESTS)
    with serving({"/health": (200, {}), "/v1/models": _models()}) as url:
        result = pytester.runpytest("--rollout-chaos", f"--rollout-chaos-policy-url={url}", "-o", SHORT_READY)
    _one_usage_error(result)
    result.stderr.fnmatch_lines(
        ["*was not ready within*last: GET /v1/models answered 200 but listed no model)*"]
    )


def test_without_the_flag_the_url_is_not_checked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    with refusing_port() as port:
        result = pytester.runpytest(f"--rollout-chaos-policy-url=http://127.0.0.1:{port}", "-o", SHORT_READY)
    result.assert_outcomes(passed=1)


def test_chaos_policy_is_the_running_server_with_no_process(pytester: pytest.Pytester) -> None:
    """No ``/health`` route (404): readiness is judged by ``/v1/models``, whose first id is served."""
    pytester.makepyfile(
        test_policy="""
        def test_policy(chaos_policy, chaos_harness):
            assert chaos_policy.process is None
            assert chaos_policy.backend == "external"
            assert chaos_policy.model == "first-model"
            assert chaos_policy.base_url == chaos_policy.url + "/v1"
            assert chaos_policy.model_dir.name == "tiny-llama"
            assert chaos_policy.events_files() == []
            assert "cannot signal" in chaos_policy.unmanaged_reason()
            assert chaos_harness.processes == ()  # nothing was started for it
            print("POLICY-URL", chaos_policy.url)
        """
    )
    with serving({"/v1/models": _models("first-model", "second-model")}) as url:
        result = pytester.runpytest("--rollout-chaos", f"--rollout-chaos-policy-url={url}/v1", "-s", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"rollout-chaos: target=reference, policy={url} (external), *",
            f"*POLICY-URL {url}",
            f"policy: external server at {url}/v1, model 'first-model', tokenizer from *tiny-llama "
            "(not started by this run)",
        ]
    )


def test_the_model_named_by_the_model_directory_is_chosen(pytester: pytest.Pytester) -> None:
    model_dir = pytester.mkdir("my-model")
    pytester.makepyfile(
        test_policy="""
        def test_policy(chaos_policy):
            print("MODEL", chaos_policy.model)
        """
    )
    ids = ("meta/other", "org/my-model")
    with serving({"/health": (200, {}), "/v1/models": _models(*ids)}) as url:
        result = pytester.runpytest(
            "--rollout-chaos", f"--rollout-chaos-policy-url={url}", f"--rollout-chaos-model={model_dir}", "-s"
        )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*MODEL org/my-model"])
