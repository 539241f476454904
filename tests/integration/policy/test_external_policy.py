"""Catalog scenarios against a policy server this run did not start (``--rollout-chaos-policy-url``).

The server is ``tests/programs/plain_openai_server.py``: a plain OpenAI-compatible server that
imports nothing of ours, started here as someone else would start theirs. An inner pytest runs
the baseline scenario on the whole stack in front of it (fault layer, Toxiproxy, Gym servers),
and scenarios and Python tests whose process faults aim at the policy, which must skip or fail
saying why. Afterwards no process of the inner run is left, and the external server, which the
inner run must never signal, still runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pytest_rollout_chaos import bundled
from tests.conftest import INNER_ASYNCIO_INI

PLAIN_SERVER = Path(__file__).resolve().parents[2] / "programs" / "plain_openai_server.py"
SERVED_MODEL = "someone-elses-model"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
INNER_TIMEOUT_S = 300.0
EXTERNAL_REASON = (
    "the policy is an external server (--rollout-chaos-policy-url={url}/v1), "
    "which this run did not start and cannot signal"
)
# run as they are: no fault, and a semantic fault on the policy's answers (the fault layer acts on them)
CATALOG_RUN = ("policy-nan-logprobs",)
# The plain server answers one fixed text, no tool call: no row has a second turn, so the baseline
# judges no prefix and sees no multi-turn row. It must fail as vacuous, never pass.
CATALOG_VACUOUS = ("baseline",)
# skipped: the policy's ready_delay_s needs a process to stop and restart
CATALOG_SKIP = ("policy-not-ready-at-start",)

KILL_POLICY = textwrap.dedent(
    """\
    name: policy-killed
    description: the policy is killed while rows are in flight
    workload:
      rows_per_task: 2
      tasks: [echo]
    faults:
      - kind: latency
        target: agent->model
        latency_ms: 50
      - kind: kill
        target: policy
        at: {after_s: 0.1}
    expect:
      raises: {type: Exception}
      invariants: [accounted, bounded]
      within_s: 30
    """
)
PYTHON_TESTS = textwrap.dedent(
    """\
    import pytest

    from pytest_rollout_chaos.errors import FaultError

    EXPECTED_MODEL = "@MODEL@"


    def test_the_policy_is_the_external_server(chaos_policy, chaos_stack):
        assert chaos_policy.process is None
        assert chaos_policy.model == EXPECTED_MODEL
        assert "policy" not in chaos_stack.servers()


    @pytest.mark.chaos_fault("freeze", "policy")
    def test_marked_process_fault_on_the_policy_skips(chaos_faults):
        raise AssertionError("must have been skipped")


    @pytest.mark.asyncio
    async def test_injected_process_fault_on_the_policy_says_why(chaos_faults):
        with pytest.raises(FaultError) as raised:
            await chaos_faults.inject("kill", "policy")
        print("FAULT-ERROR", raised.value)
    """
).replace("@MODEL@", SERVED_MODEL)


@contextlib.contextmanager
def plain_server(log_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Start the plain server on a free port; its root URL. Stopped (TERM, then KILL) on every path."""
    argv = [
        sys.executable,
        str(PLAIN_SERVER),
        "--tokenizer",
        str(bundled.tiny_model_dir() / "tokenizer.json"),
        "--model",
        SERVED_MODEL,
    ]
    with log_path.open("w") as log:
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
        )
    try:
        yield f"http://127.0.0.1:{_port_of(process, log_path)}", process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT_S)
        assert process.stdout is not None
        process.stdout.close()


def _port_of(process: subprocess.Popen[str], log_path: Path) -> int:
    """The port from the server's ``LISTENING <port>`` line, within ``START_TIMEOUT_S``."""
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0:
            if selector.select(timeout=remaining):
                line = process.stdout.readline()
                if line.startswith("LISTENING "):
                    return int(line.split()[1])
                if not line:  # the server exited before it listened
                    break
    raise AssertionError(
        f"the plain server did not listen within {START_TIMEOUT_S}s (exit code {process.poll()}):\n"
        + log_path.read_text()
    )


def _stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url + "/stats", timeout=5) as response:
        counts: dict[str, int] = json.load(response)
    return counts


def _left_under(directory: Path, *, besides: set[int], timeout_s: float = 10.0) -> list[str]:
    """Live processes working in or pointed at ``directory`` (the inner run's), other than ``besides``
    (this test's own: pytester points their environment there too), after a grace."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = []
        for process in psutil.process_iter():
            try:
                if process.pid in besides or process.status() == psutil.STATUS_ZOMBIE:
                    continue
                cwd = process.cwd()
                environ = process.environ()
                if cwd.startswith(str(directory)) or any(
                    str(directory) in value for value in environ.values()
                ):
                    left.append(f"{process.pid} {' '.join(process.cmdline())[:200]}")
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@pytest.mark.slow  # runs scenarios on the Gym stack in front of the external policy
def test_scenarios_run_against_a_server_this_run_did_not_start(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makeini("[pytest]\n" + INNER_ASYNCIO_INI)
    catalog = bundled.catalog_dir()
    for name in CATALOG_RUN + CATALOG_VACUOUS + CATALOG_SKIP:
        pytester.makefile(".chaos.yaml", **{name: (catalog / f"{name}.chaos.yaml").read_text()})
    pytester.makefile(".chaos.yaml", **{"policy-killed": KILL_POLICY})
    pytester.makepyfile(test_external=PYTHON_TESTS)
    with plain_server(tmp_path / "plain-server.log") as (url, server):
        result = pytester.runpytest_subprocess(
            "--rollout-chaos",
            f"--rollout-chaos-policy-url={url}/v1",
            "-v",
            "-s",
            "-rs",
            "-p",
            "no:cacheprovider",
            timeout=INNER_TIMEOUT_S,
        )
        stats = _stats(url)
        still_running = server.poll() is None
        left = _left_under(pytester.path, besides={os.getpid(), server.pid})
    reason = EXTERNAL_REASON.format(url=url)
    result.assert_outcomes(passed=3, failed=1, skipped=3)
    result.stdout.fnmatch_lines_random(
        [
            *(f"*{name}.chaos.yaml::{name} PASSED*" for name in CATALOG_RUN),
            *(f"*{name}.chaos.yaml::{name} FAILED*" for name in CATALOG_VACUOUS),
            "*prefix_consistent: NOT_JUDGED: no returned rollout has two turns or more*",
            # a server this run did not start samples irreproducibly: a run that tested nothing is drawn again
            "  drawn 3 times (the policy samples irreproducibly); the earlier draws tested nothing:",
            "    draw 2: vacuous: prefix_consistent: NOT_JUDGED*",
            f"SKIPPED * faults/1 kill on 'policy': {reason}",
            f"SKIPPED * stack.policy.ready_delay_s=1 stops and restarts the policy: {reason}",
            f"SKIPPED * chaos_fault('freeze', 'policy'): {reason}",
            f"*FAULT-ERROR kill on 'policy': {reason}",
            f"rollout-chaos: target=reference, policy={url} (external), *",
            f"policy: external server at {url}/v1, model '{SERVED_MODEL}', tokenizer from *tiny-llama *",
        ]
    )
    # the stack really went to the external server: the Gym model server's chat and /tokenize calls
    assert stats.get("/v1/chat/completions", 0) >= 8, stats
    assert stats.get("/tokenize", 0) >= 8, stats
    assert still_running, "the inner run stopped a server it did not start"
    assert left == [], f"processes of the inner run are still alive: {left}"


@pytest.mark.slow  # one scenario on the Gym stack in front of the external policy
def test_redraws_zero_judges_the_first_draw_alone(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makeini("[pytest]\n" + INNER_ASYNCIO_INI)
    pytester.makefile(".chaos.yaml", baseline=(bundled.catalog_dir() / "baseline.chaos.yaml").read_text())
    with plain_server(tmp_path / "plain-server.log") as (url, _):
        result = pytester.runpytest_subprocess(
            "--rollout-chaos",
            f"--rollout-chaos-policy-url={url}/v1",
            "--rollout-chaos-redraws=0",
            "-p",
            "no:cacheprovider",
            timeout=INNER_TIMEOUT_S,
        )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["VacuousScenarioError:", "  outcome: *"])
    result.stdout.no_fnmatch_line("*drawn * times*")
