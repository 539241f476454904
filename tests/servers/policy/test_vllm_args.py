"""The ``vllm serve`` command: the harness's flags, the defaults the user did not name, the user's flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.servers.policy import vllm_args
from pytest_rollout_chaos.servers.policy.gpus import GIB, Gpu
from pytest_rollout_chaos.servers.policy.protocol import MAX_LOGPROBS
from pytest_rollout_chaos.servers.policy.vllm import (
    DEFAULT_VLLM_ARGS,
    GPU_DEFAULT_ARGS,
    VllmPython,
    default_args,
    vllm_policy_spec,
)

H100 = Gpu(0, "GPU-aaaa", "NVIDIA H100 80GB HBM3", 80 * GIB, 0)


def _spec_argv(tmp_path: Path, user: tuple[str, ...] = (), max_model_len: int | None = None) -> list[str]:
    vllm = VllmPython(tmp_path / "python", "0.32.0", "3.11.7", tmp_path / "vllm")
    spec = vllm_policy_spec(
        bundled.tiny_model_dir(), vllm=vllm, port=8123, seed=5, user_args=user, max_model_len=max_model_len
    )
    return list(spec.argv)


def test_user_flags_come_after_the_harness_flags_and_replace_the_defaults_they_name(tmp_path: Path) -> None:
    argv = _spec_argv(tmp_path, ("--max-model-len", "512", "--dtype=bfloat16", "--no-enforce-eager"))
    assert argv[:3] == [str(tmp_path / "vllm"), "serve", str(bundled.tiny_model_dir())]
    assert argv[3:13] == [
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--served-model-name",
        "tiny-llama",
        "--seed",
        "5",
        "--max-logprobs",
        str(MAX_LOGPROBS),
    ]
    assert argv[-4:] == ["--max-model-len", "512", "--dtype=bfloat16", "--no-enforce-eager"]
    assert "float32" not in argv  # the default --dtype float32 went
    assert "--enforce-eager" not in argv  # and the switch its --no- form names
    assert argv[argv.index("--tool-call-parser") + 1] == "hermes"  # defaults not named stay
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.3"


def test_without_user_flags_the_cpu_command_is_what_it_was(tmp_path: Path) -> None:
    argv = _spec_argv(tmp_path)
    assert argv[13:] == list(DEFAULT_VLLM_ARGS)


@pytest.mark.parametrize(
    ("user", "named"),
    [
        (("--port", "9000"), "--port"),
        (("--port=9000",), "--port=9000"),
        (("--host", "0.0.0.0"), "--host"),
        (("--served-model-name", "mine"), "--served-model-name"),
        (("--served_model_name", "mine"), "--served_model_name"),
        (("--max-logprobs", "0"), "--max-logprobs"),
        (("--seed", "1"), "--seed"),
        (("--model", "other"), "--model"),
        (("--api-key", "k"), "--api-key"),
    ],
)
def test_a_flag_the_harness_needs_is_refused_by_name(user: tuple[str, ...], named: str) -> None:
    problem = vllm_args.reserved_problem(user)
    assert problem is not None
    assert problem.startswith(f"--rollout-chaos-vllm-args: {named} cannot be given there: ")
    assert "(the harness sets: --api-key, --host, --max-logprobs, --model, --port," in problem
    with pytest.raises(ValueError, match=f"{named} cannot be given"):
        vllm_args.merge(["--port", "1"], DEFAULT_VLLM_ARGS, user)


def test_a_max_model_len_the_harness_passes_is_its_own(tmp_path: Path) -> None:
    assert vllm_args.reserved_problem(("--max-model-len", "512")) is None
    with pytest.raises(
        ValueError, match=r"--max-model-len cannot be given there: the harness sets it itself"
    ):
        _spec_argv(tmp_path, ("--max-model-len", "512"), max_model_len=256)


def test_a_positional_argument_is_refused_and_the_source_is_named() -> None:
    problem = vllm_args.reserved_problem(("Qwen/Qwen2.5-7B",), source="ini option 'rollout_chaos_vllm_args'")
    assert problem == (
        "ini option 'rollout_chaos_vllm_args': 'Qwen/Qwen2.5-7B' is not an option: vllm serve takes the "
        "model as its only positional argument, and that is --rollout-chaos-model"
    )


def test_split_is_a_shells_split() -> None:
    assert vllm_args.split("--max-model-len 512 --override-generation-config '{\"temperature\": 0}'") == (
        "--max-model-len",
        "512",
        "--override-generation-config",
        '{"temperature": 0}',
    )
    with pytest.raises(ValueError, match="quotation"):
        vllm_args.split("--chat-template 'open")


def test_options_are_read_as_vllm_reads_them() -> None:
    flags = vllm_args.parse(["-tp", "2", "--max_model_len=64", "--no-enforce-eager", "--seed-offset", "-1"])
    assert [(flag.name, flag.value, flag.negated) for flag in flags] == [
        ("tensor-parallel-size", "2", False),
        ("max-model-len", "64", False),
        ("enforce-eager", None, True),
        ("seed-offset", "-1", False),
    ]
    assert vllm_args.last_value(["--dtype", "half", "--dtype=bfloat16"], "dtype") == "bfloat16"


@pytest.mark.parametrize(
    ("args", "size"),
    [
        ((), 1),
        (("--tensor-parallel-size", "2"), 2),
        (("-tp", "4", "--pipeline-parallel-size=2"), 8),
        (("--tensor_parallel_size", "2", "-dp", "2"), 4),
    ],
)
def test_parallel_size(args: tuple[str, ...], size: int) -> None:
    assert vllm_args.parallel_size(args) == size


def test_a_parallel_size_that_is_not_a_count_is_named() -> None:
    with pytest.raises(ValueError, match=r"--tensor-parallel-size 'two' is not a whole number >= 1"):
        vllm_args.parallel_size(("--tensor-parallel-size", "two"))


def test_the_logprobs_limit_is_the_tiny_policys() -> None:
    assert vllm_args.MAX_LOGPROBS == MAX_LOGPROBS


def test_cpu_defaults_without_a_gpu() -> None:
    defaults, line = default_args((), bundled.tiny_model_dir())
    assert defaults == DEFAULT_VLLM_ARGS
    assert "CPU" in line


def _model(tmp_path: Path, weight_bytes: int, dtype: str) -> Path:
    tmp_path.joinpath("config.json").write_text(json.dumps({"torch_dtype": dtype}))
    with tmp_path.joinpath("model.safetensors").open("wb") as weights:
        weights.truncate(weight_bytes)  # sparse: the size is what counts
    return tmp_path


def test_gpu_defaults_drop_float32_and_eager_and_size_the_memory_share(tmp_path: Path) -> None:
    model = _model(tmp_path, 15 * GIB, "bfloat16")  # a 7B model in 16 bits
    defaults, line = default_args((H100,), model)
    assert defaults[: len(GPU_DEFAULT_ARGS)] == GPU_DEFAULT_ARGS
    assert "--enforce-eager" not in defaults
    assert defaults[defaults.index("--dtype") + 1] == "auto"
    # 15 GiB weights + 2 GiB runtime + 7.5 GiB KV cache = 24.5 GiB of 80: 0.31 -> 0.35
    assert defaults[-2:] == ("--gpu-memory-utilization", "0.35")
    assert "--gpu-memory-utilization 0.35 of 80 GiB for 15.0 GiB of weights (auto) over 1 device(s)" in line
    split, _ = default_args((H100, H100), model, ("--tensor-parallel-size", "2"))
    assert split[-1] == "0.20"  # 7.5 + 2 + 3.75 = 13.25 GiB of 80 per card
    given, line = default_args((H100,), model, ("--gpu-memory-utilization", "0.8"))
    assert given == GPU_DEFAULT_ARGS
    assert "as given" in line
