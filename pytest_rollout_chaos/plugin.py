"""pytest hook implementations only: options, settings, markers, header, harness wiring.

Without ``--rollout-chaos`` (or its ini twin) the plugin is inert: no ``*.chaos.yaml`` is
collected and every chaos fixture skips before starting anything, so a trainer's ordinary
``pytest`` is not broken by it. The run then ends with one line counting the chaos tests that
did not run and why, so a CI job that forgot the flag cannot look green by accident. Heavy
modules (torch, the servers) are imported lazily by the fixtures that need them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from pytest_rollout_chaos import options as _options
from pytest_rollout_chaos import settings as _settings
from pytest_rollout_chaos import targets
from pytest_rollout_chaos.harness import ChaosHarness
from pytest_rollout_chaos.stash import (
    DEFAULT_RUN_KEY,
    EXTERNAL_POLICY_KEY,
    HARNESS_KEY,
    NOT_ENABLED,
    SETTINGS_KEY,
)

if TYPE_CHECKING:
    pass

pytest_plugins = ["pytest_rollout_chaos.fixtures"]

HARNESS_PLUGIN_NAME: Final = "rollout-chaos-harness"
JUNIT_PLUGIN_NAME: Final = "rollout-chaos-junit"
CATALOG_INI: Final = "rollout_chaos_catalog"
# The run's last line about the chaos tests that skipped because the plugin is off.
NOT_RUN_LINE: Final = (
    "rollout-chaos: {count} chaos {tests} skipped: --rollout-chaos is off "
    "(add --rollout-chaos or rollout_chaos = true)"
)
ASYNCIO_LOOP_SCOPE_INI: Final = "asyncio_default_fixture_loop_scope"  # pytest-asyncio's
CONTROLLER_PID_KEY: Final = "rollout_chaos_controller_pid"  # in an xdist worker's workerinput

_OPTIONS: Final = (
    # (dest, metavar, help, ini type)
    (
        _settings.OPT_TARGET,
        "MODULE:FACTORY",
        "Collector under test: MODULE:FACTORY (MODULE imported from sys.path, then from the directory "
        "pytest was started in), FILE.py:FACTORY (a path from that directory), or "
        f"{', '.join(targets.BUILTIN)} (default: {targets.REFERENCE})",
    ),
    (
        _settings.OPT_BACKEND,
        "tiny|vllm",
        "Policy server engine: tiny (a real torch model on CPU) or vllm (default: tiny)",
    ),
    (
        _settings.OPT_MODEL,
        "PATH|ID",
        "Model directory in Hugging Face layout for either backend, or the id of a model in the local "
        "Hugging Face cache (ORG/NAME[@REVISION]; nothing is downloaded) (default: the bundled tiny model)",
    ),
    (
        _settings.OPT_TOXIPROXY,
        "auto|embedded|binary|docker|URL",
        "Where network faults come from (default: auto = TOXIPROXY_URL, toxiproxy-server, Docker, embedded)",
    ),
    (
        _settings.OPT_GYM,
        "embedded|nemo-gym",
        "Agent servers: the embedded NeMo Gym-protocol servers or real NeMo Gym (default: embedded)",
    ),
    (
        _settings.OPT_GYM_PYTHON,
        "PATH",
        "Interpreter with nemo_gym installed, for --rollout-chaos-gym=nemo-gym and "
        f"--rollout-chaos-target={targets.NEMO_GYM}",
    ),
    (
        _settings.OPT_VLLM_PYTHON,
        "PATH",
        "Interpreter with vllm installed, for --rollout-chaos-backend=vllm "
        "(default: ROLLOUT_CHAOS_VLLM_PYTHON, else the current one if it imports vllm)",
    ),
    (
        _settings.OPT_VLLM_ARGS,
        "ARGS",
        "Flags for vllm serve with --rollout-chaos-backend=vllm, as a shell would split them, passed after "
        "the harness's own (host, port, served model name, seed, logprobs limit, which cannot be given); "
        "they replace the defaults they name, such as --dtype or --gpu-memory-utilization",
    ),
    (
        _settings.OPT_POLICY_GPUS,
        "N",
        "With --rollout-chaos-ray and the vllm backend, the GPUs the policy's actor asks Ray for "
        "(default: the tensor x pipeline parallel size in --rollout-chaos-vllm-args where CUDA devices "
        "are visible, else 0)",
    ),
    (
        _settings.OPT_POLICY_REPLICAS,
        "N",
        "Start N policy servers (tiny or vllm), each behind its own proxy, that the model server "
        "spreads its calls over as NeMo Gym's vllm_model does over its base URLs; scenario targets "
        "policy[0], policy[1], ... name one (default: 1)",
    ),
    (
        _settings.OPT_LAYER_PROCESSES,
        "N|auto",
        "Run the fault layer as N processes, the kernel spreading each link's connections over them "
        "and the first deciding every request's rules and row, or auto: the machine's cores, at most 8 "
        "(default: 1)",
    ),
    (
        _settings.OPT_REDRAWS,
        "N",
        "Where the policy samples irreproducibly (real vLLM, --rollout-chaos-policy-url), draw a "
        "scenario whose run tested nothing (a fault unfired or touching nothing, a listed invariant not "
        "judged, a witness unseen) again, up to N times; a verdict is never drawn again (default: 2)",
    ),
    (
        _settings.OPT_POLICY_URL,
        "URL",
        "Use the OpenAI-compatible policy server already running at URL (vLLM, SGLang, ...) instead of "
        "starting one; http(s)://host:port, with or without a trailing /v1",
    ),
    (
        _settings.OPT_UPSTREAM,
        "PATH",
        "A checkout or unpacked tree of the trainer that --rollout-chaos-target=nemo_rl|slime|verl|skyrl "
        "drives, put first on sys.path (default: the installed package)",
    ),
    (
        _settings.OPT_RAY,
        "off|local[:N]|ADDRESS",
        "Run the policy and Gym servers in Ray actors: off, a cluster of N nodes started on this machine, "
        "each on its own loopback address 127.0.0.2, 127.0.0.3, ... (local:N), or the cluster at ADDRESS "
        "(HOST:PORT of its GCS); needs pytest-rollout-chaos[ray] (default: off)",
    ),
    (
        _settings.OPT_SCENARIO,
        "NAME[,NAME...]",
        "Also run these built-in scenarios, by the names rollout-chaos list prints; with no paths "
        "given, only these instead of the whole catalog and the project's scenario files",
    ),
    (_settings.OPT_SEED, "N", "Seed for every random choice: fault schedules, sampling (default: 0)"),
    (
        _settings.OPT_FUZZ,
        "N",
        "Run each scenario N more times after the catalog, its workload and fault schedule drawn as a "
        "trainer's vary (rows, tasks, their order and ids, environment latency, when faults fire, the "
        "policy's seed, now and then a next step on the same collector); a failing draw is shrunk and "
        "written as a scenario file (default: 0)",
    ),
    (
        _settings.OPT_FUZZ_DIR,
        "DIR",
        "Where --rollout-chaos-fuzz writes each failing draw, shrunk "
        f"(default: ./{_settings.DEFAULT_FUZZ_DIR})",
    ),
    (
        _settings.OPT_LOGS,
        "implicated|all|none",
        "Server log tails shown with a failure: implicated (the servers its evidence or fault schedule "
        "names, and any that exited, without the embedded Toxiproxy's and the fault layer's INFO lines), "
        "all (every server's, as written) or none; one line says where every log is (default: implicated)",
    ),
    (_settings.OPT_REPORT, "PATH", "Write the HTML report (a timeline per scenario) to PATH"),
    (
        _settings.OPT_JSON,
        "PATH",
        "Write the results as one JSON document to PATH: the run's settings and versions, and per "
        "scenario its outcome, verdicts, faults and what they touched, and timings",
    ),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rollout-chaos", "chaos testing of RL rollout collection")
    group.addoption(
        "--rollout-chaos",
        action="store_const",
        const=True,
        default=None,
        dest=_settings.OPT_ENABLED,
        help="Enable rollout chaos: collect *.chaos.yaml files and allow the chaos fixtures",
    )
    parser.addini(_settings.OPT_ENABLED, "Enable rollout chaos (twin of --rollout-chaos)", default="")
    parser.addini(
        CATALOG_INI,
        "With --rollout-chaos and no paths, collect the built-in catalog and the *.chaos.yaml files "
        "only, not the other tests (false: pytest's usual collection)",
        type="bool",
        default=True,
    )
    parser.addini(
        _settings.INI_POLICY_READY_TIMEOUT,
        "Seconds the server of --rollout-chaos-policy-url may take to answer ready at session start "
        f"(default: {_settings.DEFAULT_POLICY_READY_TIMEOUT_S:g})",
        default="",
    )
    for dest, metavar, help_text in _OPTIONS:
        flag = "--" + dest.replace("_", "-")
        group.addoption(flag, action="store", default=None, dest=dest, metavar=metavar, help=help_text)
        parser.addini(dest, f"{help_text} (twin of {flag})", default="")


def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """With rollout-chaos on, pytest-asyncio's fixture loop scope defaults to ``function``.

    pytest-asyncio warns in every run where ``asyncio_default_fixture_loop_scope`` is unset, so a
    fresh repository's first ``pytest --rollout-chaos`` would print its deprecation warning. The
    default is given where the user set none (their ini or ``-o`` value always wins), and only when
    the plugin is enabled: without ``--rollout-chaos`` it stays inert for other suites.
    """
    if not early_config.pluginmanager.has_plugin("asyncio") or not _options.enabled_early(early_config):
        return
    parser.addini(
        ASYNCIO_LOOP_SCOPE_INI,
        "default scope of the asyncio event loop used to execute async fixtures",
        default="function",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: a rollout-chaos scenario or a test using its servers")
    config.addinivalue_line(
        "markers",
        "chaos_fault(kind, target, **params): inject a fault (scenario names) while the test runs; "
        "applied by the chaos_faults fixture, which chaos_collector uses",
    )
    config.addinivalue_line("markers", "fuzz: a drawn variant of a scenario (--rollout-chaos-fuzz)")
    controller = getattr(config, "workerinput", {}).get(CONTROLLER_PID_KEY)
    if isinstance(controller, int):  # an xdist worker: its reaper watches the controller too
        from pytest_rollout_chaos.servers.reaper_client import reaper

        reaper().watch_controller(controller)
    settings = _options.resolve(config)
    config.stash[SETTINGS_KEY] = settings
    if settings.enabled:
        from pytest_rollout_chaos.collector import target

        if target.names_a_module(settings.target):  # found from where pytest started, wherever the files are
            config.add_cleanup(target.search_last(config.invocation_params.dir))
    if settings.enabled and settings.upstream is not None:
        from pytest_rollout_chaos.collector.adapters.upstream import use_tree

        use_tree(settings.upstream)
    if settings.enabled:
        harness = ChaosHarness(settings)
        harness.install_sigterm_handler()
        config.stash[HARNESS_KEY] = harness
        config.pluginmanager.register(harness, HARNESS_PLUGIN_NAME)
        from pytest_rollout_chaos.report.junit import JunitNames

        config.pluginmanager.register(JunitNames(config), JUNIT_PLUGIN_NAME)  # scenarios' JUnit class names
        from pytest_rollout_chaos import default_run, node_ids

        node_ids.resolve_args(config)  # a built-in scenario's id, pasted from a failure, names its file
        run = default_run.start(
            config,
            flag_given=config.getoption(_settings.OPT_ENABLED, default=None) is True,
            switched_on=bool(config.getini(CATALOG_INI)),
            named=settings.scenarios,
        )
        if run is not None:
            config.stash[DEFAULT_RUN_KEY] = run


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, in the controller: tell each worker who its controller is, so that the
    worker's reaper also watches it and a SIGKILLed controller takes every worker's servers."""
    node.workerinput[CONTROLLER_PID_KEY] = os.getpid()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drawn variants (``--rollout-chaos-fuzz``) run after every other item: the catalog's own
    scenarios then see the policy's samples as they do in a run without fuzz."""
    drawn = [item for item in items if item.get_closest_marker("fuzz") is not None]
    if drawn:
        items[:] = [item for item in items if item.get_closest_marker("fuzz") is None] + drawn


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``pytest --rollout-chaos`` without paths collects scenario files only (see ``default_run``)."""
    if DEFAULT_RUN_KEY not in config.stash:
        return None
    from pytest_rollout_chaos.default_run import leaves_out

    return True if leaves_out(collection_path) else None


def pytest_sessionstart(session: pytest.Session) -> None:
    """A ``--rollout-chaos-target`` that cannot be loaded, a vllm backend with no vLLM to run, a
    ``--rollout-chaos-policy-url`` that is not ready, or a model, NeMo Gym or Toxiproxy setting that
    cannot be had is a usage error before anything starts."""
    settings = session.config.stash.get(SETTINGS_KEY, None)
    if settings is None or not settings.enabled:
        return
    from pytest_rollout_chaos.collector.target import load_factory
    from pytest_rollout_chaos.errors import CollectorTargetError

    try:
        load_factory(settings.target)
    except CollectorTargetError as error:
        raise pytest.UsageError(f"--rollout-chaos-target: {error}") from error
    from pytest_rollout_chaos import preflight

    preflight.check(settings)  # model, NeMo Gym interpreter, Toxiproxy mode: one usage error
    if settings.policy_url is not None:
        _check_policy_url(session.config, settings.policy_url, settings)
    elif settings.backend == "vllm":
        _check_vllm(settings)


def _check_policy_url(config: pytest.Config, url: str, settings: _settings.ChaosSettings) -> None:
    """An external policy that does not answer, or never answers ready, is one usage error."""
    from pytest_rollout_chaos.servers.policy.external import ExternalPolicyError, connect

    try:
        policy = connect(url, model_dir=settings.model, timeout_s=settings.policy_ready_timeout_s)
    except ExternalPolicyError as error:
        raise pytest.UsageError(f"--rollout-chaos-policy-url={url}: {error}") from error
    config.stash[EXTERNAL_POLICY_KEY] = policy


def _check_vllm(settings: _settings.ChaosSettings) -> None:
    """No interpreter that runs vLLM is one usage error at the start, not an error per test."""
    from pytest_rollout_chaos.servers.policy.vllm import VllmMissingError, locate

    try:
        locate(settings.vllm_python)
    except VllmMissingError as error:
        raise pytest.UsageError(f"--rollout-chaos-backend=vllm: {error}") from error


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None or not settings.enabled:
        return None
    run = config.stash.get(DEFAULT_RUN_KEY, None)
    return [settings.header_line()] + ([run.header_line()] if run is not None else [])


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    settings = parent.config.stash.get(SETTINGS_KEY, None)
    if settings is None or not settings.enabled or not file_path.name.endswith(".chaos.yaml"):
        return None
    from pytest_rollout_chaos.node_ids import file_nodeid
    from pytest_rollout_chaos.scenario_items import ScenarioFile

    # None: pytest's own id; outside the rootdir, one that reruns the file as printed
    nodeid = file_nodeid(file_path, parent.config)
    return ScenarioFile.from_parent(parent, path=file_path, settings=settings, nodeid=nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """With the plugin off, one line: how many chaos tests were skipped for it (none: no line)."""
    settings = terminalreporter.config.stash.get(SETTINGS_KEY, None)
    if settings is None or settings.enabled:
        return  # on, the harness writes the rollout-chaos section
    count = sum(
        1 for report in terminalreporter.stats.get("skipped", ()) if NOT_ENABLED in str(report.longrepr)
    )
    if count:
        line = NOT_RUN_LINE.format(count=count, tests="test" if count == 1 else "tests")
        terminalreporter.write_line(line, yellow=True, bold=True)
