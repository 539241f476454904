"""The catalog on real vLLM on GPUs, as GPU users run it: on one card with the bundled tiny model and
with a small real model from the local HF cache, tensor parallel over two cards, and under Ray with
the GPU Ray assigns. Each test skips, saying why, without a CUDA device (or vLLM, or the model)."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path

import pytest

from pytest_rollout_chaos.settings import ChaosSettings
from tests.catalog._verdicts import CATALOG, ScenarioVerdicts, run_catalog
from tests.catalog.test_catalog import skipped_on
from tests.gpu import _gpu

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _vllm_env(monkeypatch: pytest.MonkeyPatch, devices: str) -> None:
    """The child runs see these cards and use the vLLM interpreter found here."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", devices)
    monkeypatch.setenv("ROLLOUT_CHAOS_VLLM_PYTHON", str(_gpu.vllm_python().path))


def _assert_catalog_passes(verdicts: dict[str, ScenarioVerdicts]) -> None:
    assert len(verdicts) == len(list(CATALOG.glob("*.chaos.yaml")))
    skipped = {name for name, result in verdicts.items() if result.skipped is not None}
    assert skipped == skipped_on(ChaosSettings())  # Ray's faults, without Ray
    failed = {
        name: result.message for name, result in verdicts.items() if not result.passed and name not in skipped
    }
    assert not failed, "\n\n".join(f"{name}:\n{message}" for name, message in failed.items())


@pytest.mark.parametrize("model", ["bundled tiny model", "model from the HF cache"])
def test_the_catalog_passes_on_real_vllm_on_one_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    card = _gpu.cards(1)[0]
    model_args = [] if model.startswith("bundled") else [f"--rollout-chaos-model={_gpu.model_id()}"]
    _vllm_env(monkeypatch, str(card.index))
    facts = tmp_path / "results.json"
    verdicts = run_catalog(
        tmp_path,
        target="reference",
        stack_args=["--rollout-chaos-backend=vllm", *model_args, f"--rollout-chaos-json={facts}"],
        timeout_s=3600,
    )
    _assert_catalog_passes(verdicts)
    run = _gpu.run_facts(facts)
    command = shlex.split(_gpu.vllm_command(run))
    assert command[command.index("--dtype") + 1] == "auto"  # the GPU defaults, not the CPU's
    assert "--enforce-eager" not in command
    assert 0.05 <= float(command[command.index("--gpu-memory-utilization") + 1]) <= 0.9
    assert any(line.startswith("vllm defaults: GPU (1 x ") for line in run["environment"]), run["environment"]


def test_the_catalog_passes_tensor_parallel_over_two_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _gpu.cards(2)[:2]
    _vllm_env(monkeypatch, f"{first.index},{second.index}")
    facts = tmp_path / "results.json"
    verdicts = run_catalog(
        tmp_path,
        target="reference",
        stack_args=[
            "--rollout-chaos-backend=vllm",
            f"--rollout-chaos-model={_gpu.model_id()}",
            "--rollout-chaos-vllm-args=--tensor-parallel-size 2",
            f"--rollout-chaos-json={facts}",
        ],
        timeout_s=3600,
    )
    _assert_catalog_passes(verdicts)
    assert _gpu.vllm_command(_gpu.run_facts(facts)).endswith(" --tensor-parallel-size 2")


def test_under_ray_the_policy_gets_the_gpu_ray_assigns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = _gpu.cards(1)[0]
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed here: pip install 'pytest-rollout-chaos[ray]'")
    _vllm_env(monkeypatch, str(card.index))
    facts = tmp_path / "results.json"
    verdicts = run_catalog(
        tmp_path,
        target="reference",
        # the second restarts the policy: its new server must get the GPU again
        scenarios=["baseline", "policy-not-ready-at-start"],
        stack_args=[
            "--rollout-chaos-backend=vllm",
            "--rollout-chaos-ray=local",
            f"--rollout-chaos-json={facts}",
        ],
        timeout_s=1800,
    )
    failed = {name: result.message for name, result in verdicts.items() if not result.passed}
    assert not failed, failed
    environment = _gpu.run_facts(facts)["environment"]
    # Ray's ids are those of CUDA_VISIBLE_DEVICES when its node started: the card's own index
    assert any(f"policy -> node 0 (GPUs {card.index})" in line for line in environment), environment
    assert any("asks Ray for 1 GPU(s)" in line for line in environment), environment
