"""What the GPU suite needs: CUDA devices, a vLLM interpreter and a model in the local HF cache,
each a skip that says what is missing; and child runs of the catalog on that stack."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

import pytest

from pytest_rollout_chaos.servers.policy import gpus, hf_cache
from pytest_rollout_chaos.servers.policy.vllm import VllmMissingError, VllmPython, locate

MODEL_ENV: Final = "ROLLOUT_CHAOS_GPU_MODEL"
DEFAULT_MODEL: Final = "Qwen/Qwen2.5-0.5B-Instruct"
NO_GPU: Final = "no CUDA device is visible here ({why}); the GPU suite runs on a machine with one"


def cards(count: int = 1) -> tuple[gpus.Gpu, ...]:
    """The visible cards, or a skip when there are fewer than ``count``."""
    visible = gpus.visible()
    if not visible:
        pytest.skip(NO_GPU.format(why=gpus.describe_none()))
    if len(visible) < count:
        pytest.skip(f"this needs {count} visible CUDA devices, and {len(visible)} are visible")
    return visible


def vllm_python() -> VllmPython:
    """The vLLM interpreter (``ROLLOUT_CHAOS_VLLM_PYTHON`` or this one), or a skip saying how to get one."""
    try:
        return locate(None)
    except VllmMissingError as error:
        pytest.skip(f"real vLLM is not available: {error}")


def model_id() -> str:
    """The model of ``ROLLOUT_CHAOS_GPU_MODEL`` (a small one by default), or a skip when it is not cached."""
    model = os.environ.get(MODEL_ENV, DEFAULT_MODEL)
    try:
        hf_cache.resolve(model)
    except hf_cache.ModelNotCachedError as error:
        pytest.skip(f"{MODEL_ENV}: {error}")
    return model


def run_facts(path: Path) -> dict[str, Any]:
    """The ``run`` part of a ``--rollout-chaos-json`` document."""
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return dict(document["run"])


def vllm_command(facts: dict[str, Any]) -> str:
    """The ``vllm serve`` command line the run's facts show."""
    [command] = [line for line in facts["environment"] if line.startswith("vllm command: ")]
    return str(command).removeprefix("vllm command: ")
