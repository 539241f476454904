"""Options and their ini twins parse; bad values are UsageErrors; without the flag nothing starts."""

from __future__ import annotations

import os

import pytest

from pytest_rollout_chaos import options
from pytest_rollout_chaos import settings as s
from tests.conftest import INNER_ASYNCIO_INI

SHOW_SETTINGS = """
    def test_show(chaos_settings):
        print("SETTINGS", chaos_settings)
"""


def test_help_lists_every_option_in_the_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*chaos testing of RL rollout collection*"])
    for dest in (
        s.OPT_ENABLED,
        s.OPT_TARGET,
        s.OPT_BACKEND,
        s.OPT_MODEL,
        s.OPT_TOXIPROXY,
        s.OPT_GYM,
        s.OPT_GYM_PYTHON,
        s.OPT_POLICY_URL,
        s.OPT_UPSTREAM,
        s.OPT_RAY,
        s.OPT_VLLM_ARGS,
        s.OPT_POLICY_GPUS,
        s.OPT_POLICY_REPLICAS,
        s.OPT_LAYER_PROCESSES,
        s.OPT_REDRAWS,
        s.OPT_SCENARIO,
        s.OPT_SEED,
        s.OPT_LOGS,
        s.OPT_REPORT,
        s.OPT_JSON,
    ):
        result.stdout.fnmatch_lines([f"*--{dest.replace('_', '-')}*"])
        result.stdout.fnmatch_lines([f"*{dest} (*"])  # the ini twin in the ini section


def test_defaults(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure()
    settings = options.resolve(config)
    assert settings.enabled is False
    assert settings.target == "reference"
    assert settings.backend == "tiny"
    assert settings.toxiproxy == "auto"
    assert settings.gym == "embedded"
    assert settings.seed == 0
    assert settings.report is None
    assert settings.json_report is None
    assert settings.policy_url is None
    assert settings.model.name == "tiny-llama"
    assert settings.layer_processes == 1
    assert settings.redraws == 2


def test_redraws_from_the_ini_and_the_command_line_and_zero_for_none(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        rollout_chaos_redraws = "5"
        asyncio_default_fixture_loop_scope = "function"
        """
    )
    assert options.resolve(pytester.parseconfigure()).redraws == 5
    never = options.resolve(pytester.parseconfigure("--rollout-chaos-redraws=0"))
    assert never.redraws == 0
    assert "redraws=0" in never.header_line()


def test_layer_processes_from_the_ini_the_command_line_and_auto(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        rollout_chaos_layer_processes = "3"
        asyncio_default_fixture_loop_scope = "function"
        """
    )
    assert options.resolve(pytester.parseconfigure()).layer_processes == 3
    given = options.resolve(pytester.parseconfigure("--rollout-chaos-layer-processes=2"))
    assert given.layer_processes == 2
    assert "layer-processes=2" in given.header_line()
    auto = options.resolve(pytester.parseconfigure("--rollout-chaos-layer-processes=auto"))
    assert auto.layer_processes == min(os.cpu_count() or 1, 8)


def test_command_line_values(pytester: pytest.Pytester) -> None:
    model = pytester.mkdir("model")
    config = pytester.parseconfigure(
        "--rollout-chaos",
        "--rollout-chaos-target=my_pkg.chaos:make",
        "--rollout-chaos-backend=vllm",
        f"--rollout-chaos-model={model}",
        "--rollout-chaos-toxiproxy=http://127.0.0.1:8474",
        "--rollout-chaos-gym=nemo-gym",
        "--rollout-chaos-seed=42",
        "--rollout-chaos-report=out/report.html",
        "--rollout-chaos-json=out/results.json",
    )
    settings = options.resolve(config)
    assert settings.enabled is True
    assert settings.target == "my_pkg.chaos:make"
    assert settings.backend == "vllm"
    assert settings.model == model
    assert settings.toxiproxy == "http://127.0.0.1:8474"
    assert settings.gym == "nemo-gym"
    assert settings.seed == 42
    assert settings.report == pytester.path / "out" / "report.html"
    assert settings.json_report == pytester.path / "out" / "results.json"


def test_ini_twins_and_option_precedence(pytester: pytest.Pytester) -> None:
    pytester.mkdir("model-dir")
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        rollout_chaos = "true"
        rollout_chaos_target = "nemo_rl"
        rollout_chaos_backend = "vllm"
        rollout_chaos_model = "model-dir"
        rollout_chaos_toxiproxy = "embedded"
        rollout_chaos_gym = "nemo-gym"
        rollout_chaos_seed = "7"
        rollout_chaos_report = "report.html"
        rollout_chaos_json = "results.json"
        asyncio_default_fixture_loop_scope = "function"
        """
    )
    settings = options.resolve(pytester.parseconfigure())
    assert settings.enabled is True
    assert settings.target == "nemo_rl"
    assert settings.backend == "vllm"
    assert settings.model == pytester.path / "model-dir"
    assert settings.toxiproxy == "embedded"
    assert settings.gym == "nemo-gym"
    assert settings.seed == 7
    assert settings.report == pytester.path / "report.html"
    assert settings.json_report == pytester.path / "results.json"
    overridden = options.resolve(
        pytester.parseconfigure("--rollout-chaos-seed=9", "--rollout-chaos-backend=tiny")
    )
    assert overridden.seed == 9
    assert overridden.backend == "tiny"


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("--rollout-chaos-backend=gpu", "*--rollout-chaos-backend: invalid value 'gpu' (valid: tiny, vllm)*"),
        (
            "--rollout-chaos-gym=docker",
            "*--rollout-chaos-gym: invalid value 'docker' (valid: embedded, nemo-gym)*",
        ),
        ("--rollout-chaos-seed=-1", "*--rollout-chaos-seed: invalid value '-1' (valid: an integer >= 0)*"),
        ("--rollout-chaos-seed=abc", "*--rollout-chaos-seed: invalid value 'abc' (valid: an integer >= 0)*"),
        (
            "--rollout-chaos-toxiproxy=tcp",
            "*invalid value 'tcp' (valid: auto, embedded, binary, docker, or an*",
        ),
        (
            "--rollout-chaos-target=nomodule",
            "*--rollout-chaos-target: invalid value 'nomodule' (valid: reference*",
        ),
        ("--rollout-chaos-model=missing", "*model directory * does not exist*"),
        (
            "--rollout-chaos-logs=some",
            "*--rollout-chaos-logs: invalid value 'some' (valid: implicated, all, none)*",
        ),
        (
            "--rollout-chaos-layer-processes=0",
            "*--rollout-chaos-layer-processes: invalid value '0' (valid: a whole number >= 1, or auto*",
        ),
        (
            "--rollout-chaos-redraws=twice",
            "*--rollout-chaos-redraws: invalid value 'twice' (valid: a whole number >= 0)*",
        ),
        (
            "--rollout-chaos-upstream=no-tree",
            "*--rollout-chaos-upstream: directory '*no-tree' does not exist (valid: a checkout or unpacked*",
        ),
        (
            "--rollout-chaos-ray=local:0",
            "*--rollout-chaos-ray: invalid value 'local:0': the node count '0' is not a whole number from 1 "
            "to 8 (valid: off, local (one node), local:N*",
        ),
        (
            "--rollout-chaos-ray=ray://10.0.0.1:10001",
            "*--rollout-chaos-ray: invalid value 'ray://10.0.0.1:10001': Ray Client addresses (ray://) "
            "cannot host servers*(valid: off, local*",
        ),
    ],
)
def test_bad_values_are_usage_errors(pytester: pytest.Pytester, argument: str, expected: str) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest(argument)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {expected}"])


def test_bad_ini_value_names_the_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrollout_chaos_backend = cuda\n" + INNER_ASYNCIO_INI)
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ini option 'rollout_chaos_backend' (twin of --rollout-chaos-backend): invalid value 'cuda'*"]
    )


def test_report_header_only_when_enabled(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    enabled = pytester.runpytest("--rollout-chaos", "--rollout-chaos-seed=3")
    enabled.stdout.fnmatch_lines(["rollout-chaos: target=reference, backend=tiny, *seed=3*"])
    disabled = pytester.runpytest()
    disabled.stdout.no_fnmatch_line("rollout-chaos: target=*")


def test_without_the_flag_nothing_starts_and_no_yaml_is_collected(pytester: pytest.Pytester) -> None:
    marker = pytester.path / "started"
    pytester.makepyfile(
        f"""
        import sys
        from pytest_rollout_chaos.servers import readiness
        from pytest_rollout_chaos.servers.process import ServerSpec

        def test_server(make_chaos_server):
            spec = ServerSpec("touch", (sys.executable, "-c", "open({str(marker)!r}, 'w')"),
                              probe=readiness.address_known())
            make_chaos_server(spec)

        def test_harness(chaos_harness):
            pass

        def test_plain():
            pass
        """
    )
    pytester.makefile(".chaos.yaml", broken="name: [unclosed")
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*rollout-chaos is off: pass --rollout-chaos*"])
    assert not marker.exists()


def test_the_upstream_tree_comes_first_on_sys_path(pytester: pytest.Pytester) -> None:
    """A trainer package in the tree shadows an installed one of the same name."""
    tree = pytester.mkdir("trainer-tree")
    (tree / "json").mkdir()  # a package named like a stdlib module: only sys.path order finds it
    (tree / "json" / "__init__.py").write_text("FROM_THE_TREE = True\n")
    pytester.makeini("[pytest]\n" + INNER_ASYNCIO_INI)
    pytester.makepyfile(
        """
        import importlib, sys

        def test_tree_first():
            sys.modules.pop("json", None)
            assert importlib.import_module("json").FROM_THE_TREE
        """
    )
    result = pytester.runpytest_subprocess(
        "--rollout-chaos", f"--rollout-chaos-upstream={tree}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*rollout-chaos: target=reference*upstream={tree}*"])
