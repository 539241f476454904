"""The user's vLLM flags, the policy's GPUs under Ray and a model by its Hugging Face id, as options:
what they parse to, and the usage errors that name the option and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos import options
from pytest_rollout_chaos.report.run_info import describe_run
from pytest_rollout_chaos.servers.policy import gpus
from tests.conftest import INNER_ASYNCIO_INI

SHOW_SETTINGS = """
    def test_show(chaos_settings):
        print("SETTINGS", chaos_settings)
"""


def test_vllm_args_are_shell_split_and_the_option_wins_over_its_ini_twin(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nrollout_chaos_backend = vllm\n"
        "rollout_chaos_vllm_args = --max-model-len 512 --chat-template-content-format 'string'\n"
        + INNER_ASYNCIO_INI
    )
    from_ini = options.resolve(pytester.parseconfigure())
    assert from_ini.vllm_args == ("--max-model-len", "512", "--chat-template-content-format", "string")
    given = options.resolve(pytester.parseconfigure("--rollout-chaos-vllm-args=-tp 2 --dtype bfloat16"))
    assert given.vllm_args == ("-tp", "2", "--dtype", "bfloat16")
    assert "vllm-args=-tp 2 --dtype bfloat16" in given.header_line()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            ["--rollout-chaos-vllm-args=--max-model-len 512 --port 8000"],
            "*--rollout-chaos-vllm-args: --port cannot be given there: the harness picks a free port*"
            "(the harness sets: --api-key, --host, --max-logprobs, --model, --port, --seed, "
            "--served-model-name, --uds)*",
        ),
        (
            ["--rollout-chaos-vllm-args=--served-model-name=mine"],
            "*--rollout-chaos-vllm-args: --served-model-name=mine cannot be given there: the Gym servers*",
        ),
        (
            ["--rollout-chaos-vllm-args=--chat-template 'open"],
            '*--rollout-chaos-vllm-args: "--chat-template \'open" cannot be split as a shell would: '
            "No closing quotation*",
        ),
        (
            ["--rollout-chaos-vllm-args=-tp two"],
            "*--rollout-chaos-vllm-args: --tensor-parallel-size 'two' is not a whole number >= 1*",
        ),
        (
            ["--rollout-chaos-backend=tiny", "--rollout-chaos-vllm-args=--dtype half"],
            "*--rollout-chaos-vllm-args: '--dtype half' are flags for the `vllm serve` that "
            "--rollout-chaos-backend=vllm starts; this run's policy is the tiny backend*",
        ),
        (
            ["--rollout-chaos-policy-gpus=two"],
            "*--rollout-chaos-policy-gpus: invalid value 'two' (valid: a whole number >= 0)*",
        ),
    ],
)
def test_bad_vllm_options_are_usage_errors(
    pytester: pytest.Pytester, arguments: list[str], expected: str
) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    if not any(argument.startswith("--rollout-chaos-backend") for argument in arguments):
        arguments = ["--rollout-chaos-backend=vllm", *arguments]
    result = pytester.runpytest(*arguments)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {expected}"])


def test_a_flag_the_harness_needs_in_the_ini_twin_names_the_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nrollout_chaos_backend = vllm\nrollout_chaos_vllm_args = --host 0.0.0.0\n"
        + INNER_ASYNCIO_INI
    )
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: ini option 'rollout_chaos_vllm_args' (twin of --rollout-chaos-vllm-args): --host cannot "
            "be given there: the harness binds the server to loopback*"
        ]
    )


def _cached_model(hub: Path, repo: str) -> Path:
    """A model as ``hf download`` leaves it in the hub cache (refs/main -> snapshots/<commit>)."""
    commit = "a" * 40
    folder = hub / ("models--" + repo.replace("/", "--"))
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"model_type": "qwen2"}')
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    return snapshot


def test_a_model_id_is_found_in_the_local_hf_cache(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hub = tmp_path / "hub"
    snapshot = _cached_model(hub, "Qwen/Qwen2.5-0.5B-Instruct")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    config = pytester.parseconfigure("--rollout-chaos-model=Qwen/Qwen2.5-0.5B-Instruct")
    settings = options.resolve(config)
    assert settings.model == snapshot
    assert settings.model_id == "Qwen/Qwen2.5-0.5B-Instruct"
    assert f"model=Qwen/Qwen2.5-0.5B-Instruct ({snapshot})" in settings.header_line()
    assert describe_run(config, settings).model == f"Qwen/Qwen2.5-0.5B-Instruct ({snapshot})"
    directory = pytester.mkdir("Qwen")  # a directory of that name wins over the cache
    assert options.resolve(pytester.parseconfigure(f"--rollout-chaos-model={directory}")).model_id == ""


def test_a_model_id_not_in_the_cache_is_a_usage_error_saying_where_it_looked(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest("--rollout-chaos-model=Qwen/Qwen2.5-0.5B-Instruct")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --rollout-chaos-model: 'Qwen/Qwen2.5-0.5B-Instruct' is not a model directory (* does not "
            "exist), and model 'Qwen/Qwen2.5-0.5B-Instruct' is not in the local Hugging Face cache: there is "
            f"no models--Qwen--Qwen2.5-0.5B-Instruct in the Hugging Face cache at {tmp_path / 'hub'} *"
            "nothing is downloaded during a run*`hf download Qwen/Qwen2.5-0.5B-Instruct`*"
        ]
    )


def test_gpus_asked_of_ray_on_a_machine_without_any_is_a_usage_error(pytester: pytest.Pytester) -> None:
    if gpus.visible():
        pytest.skip("this machine has a CUDA device")
    pytester.makeini("[pytest]\n" + INNER_ASYNCIO_INI)
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest(
        "--rollout-chaos",
        "--rollout-chaos-backend=vllm",
        "--rollout-chaos-ray=local",
        "--rollout-chaos-policy-gpus=1",
        "--rollout-chaos-toxiproxy=embedded",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*the policy would ask Ray for 1 GPU(s) (--rollout-chaos-policy-gpus=1), but this machine shows "
            "0 CUDA device(s); on a machine without GPUs leave the option out*"
        ]
    )


def test_policy_gpus_without_ray_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n" + INNER_ASYNCIO_INI)
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest(
        "--rollout-chaos",
        "--rollout-chaos-backend=vllm",
        "--rollout-chaos-policy-gpus=1",
        "--rollout-chaos-toxiproxy=embedded",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--rollout-chaos-policy-gpus=1: only a policy hosted by Ray asks for GPUs*"]
    )
