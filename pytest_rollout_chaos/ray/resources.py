"""What the policy's hosting actor asks Ray for: how many GPUs, and why a request cannot be had.

Ray hides the GPUs from an actor that asks for none (its ``CUDA_VISIBLE_DEVICES`` is empty),
so a vLLM server started from it would find no device. The actor therefore asks for as many as
the engine spreads over (tensor x pipeline x data parallel, from ``--rollout-chaos-vllm-args``),
or ``--rollout-chaos-policy-gpus``, and hands the server the ones Ray assigned. On a machine
without GPUs it asks for none, and an explicit request for some is a usage error.
"""

from __future__ import annotations

from typing import Final

POLICY_GPUS_OPTION: Final = "--rollout-chaos-policy-gpus"


def policy_gpus(*, ray_on: bool, backend: str, parallel: int, override: int | None, visible: int) -> int:
    """GPUs the policy's actor asks Ray for; ``ValueError`` says why the request cannot be had.

    ``parallel``: the devices the vLLM flags spread the engine over; ``override``: the option's
    value (None when not given); ``visible``: the CUDA devices this machine shows.
    """
    if override is not None:
        if not ray_on:
            raise ValueError(
                f"{POLICY_GPUS_OPTION}={override}: only a policy hosted by Ray asks for GPUs; "
                "add --rollout-chaos-ray (without Ray the server sees this process's GPUs)"
            )
        if backend != "vllm":
            raise ValueError(
                f"{POLICY_GPUS_OPTION}={override}: only the vLLM server this run starts "
                f"(--rollout-chaos-backend=vllm) asks Ray for GPUs; this run's policy is {backend}"
            )
        wanted = override
    elif not ray_on or backend != "vllm" or visible == 0:
        return 0
    else:
        wanted = parallel
    if wanted > visible:
        source = (
            f"{POLICY_GPUS_OPTION}={override}"
            if override is not None
            else f"tensor x pipeline x data parallel size {parallel} in --rollout-chaos-vllm-args"
        )
        hint = "; on a machine without GPUs leave the option out (the policy then asks for none)"
        raise ValueError(
            f"the policy would ask Ray for {wanted} GPU(s) ({source}), but this machine shows "
            f"{visible} CUDA device(s){'' if visible else hint}"
        )
    return wanted
