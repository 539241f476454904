"""A second vLLM engine asking for more GPU memory than the first left is a clear start failure: an
error in the stack's setup (not a scenario's verdict) naming the server and its command, with vLLM's
own words about memory in its log, and the first engine undisturbed. Skips without a CUDA device or
vLLM."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.servers.policy.spec import vllm_policy_spec
from pytest_rollout_chaos.servers.ports import free_port
from pytest_rollout_chaos.servers.process import ManagedProcess
from tests.catalog._verdicts import run_catalog
from tests.gpu import _gpu

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

FIRST_SHARE = "0.6"  # with the second's 0.6 more than the card has
MEMORY_WORDS = re.compile(r"(?i)free memory on device|out of memory|memory utilization|not enough memory")


def test_a_second_engine_that_does_not_fit_fails_to_start_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = _gpu.cards(1)[0]
    vllm = _gpu.vllm_python()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", str(card.index))
    monkeypatch.setenv("ROLLOUT_CHAOS_VLLM_PYTHON", str(vllm.path))
    first = ManagedProcess(
        vllm_policy_spec(
            bundled.tiny_model_dir(),
            vllm=vllm,
            name="first-engine",
            port=free_port(),
            extra_args=(),
            user_args=("--gpu-memory-utilization", FIRST_SHARE),
        ),
        tmp_path / "first",
    )
    first.start()
    try:
        verdicts = run_catalog(
            tmp_path,
            target="reference",
            scenarios=["baseline"],
            stack_args=[
                "--rollout-chaos-backend=vllm",
                "--rollout-chaos-vllm-args=--gpu-memory-utilization 0.6",
            ],
            timeout_s=900,
        )
        assert first.is_running()  # the first engine is not disturbed
    finally:
        first.stop()
    baseline = verdicts["baseline"]
    assert not baseline.passed
    assert "server 'policy' exited with code" in baseline.message, baseline.message
    assert "before it was ready" in baseline.message
    assert "--gpu-memory-utilization 0.6" in baseline.message  # the command is shown
    logs = "".join(log.read_text(errors="replace") for log in (tmp_path / "inner").rglob("policy.log"))
    assert MEMORY_WORDS.search(logs), logs[-3000:]  # vLLM's own reason
