"""The built-in catalog is the gate: the reference collector passes all of it, and every
known-bug collector fails the scenario of its bug, judged by the invariant its bug breaks,
while still passing the fault-free baseline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures.collectors import FOUND_BY_FUZZ, KNOWN_BUGS
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.base import Need
from pytest_rollout_chaos.invariants import registry as invariants
from pytest_rollout_chaos.scenario.model import Scenario, load_scenario
from pytest_rollout_chaos.servers.gym.stack import DEFAULT_AGENTS
from pytest_rollout_chaos.servers.nemo_gym.locate import locate
from pytest_rollout_chaos.servers.policy.vllm import locate as locate_vllm
from pytest_rollout_chaos.settings import ChaosSettings
from tests.catalog._verdicts import CATALOG, REPO, parse_junit, run_catalog

# known-bug collector -> (the scenario that exposes it, the invariant that must judge FAIL)
CAUGHT_BY = {
    "silent_short_count": ("short-results", "no_silent_short_count"),
    "gather_no_isolation": ("trajectory-exception-isolated", "isolated_failures"),
    "per_sample_env": ("validation-batched-env", "batched_env_eval"),
    "nan_silent": ("nan-logprobs-nan", "finite_logprobs"),
    "endless_retry": ("agent-frozen", "bounded"),
    "swallowed_exception": ("trajectory-exception-isolated", "accounted"),
    "batch_retry_duplicates": ("trajectory-exception-isolated", "accounted"),
    "prefix_passthrough": ("prefix-drift", "prefix_consistent"),
    "bare_cancelled": ("trajectory-exception-isolated", "root_cause_visible"),
    "no_deadline": ("agent-frozen", "bounded"),
    "failed_as_completed": ("trajectory-exception-isolated", "corroborated"),
    "turns_dropped_on_drift": ("unrepairable-drift", "turns_generated"),
    "nan_zeroed": ("nan-logprobs-nan", "logprobs_generated"),
    "reward_shifted": ("one-row-hangs", "rewards_recorded"),
    "unbounded_retries": ("nan-logprobs-nan", "attempts_bounded"),
    "empty_epoch": ("resources-down", "no_empty_epoch"),
    "collection_deadline_only": ("agent-frozen", "ends_promptly"),
    "detached_after_raise": ("short-results", "quiet_after_end"),
    "swallows_cancel": ("collection-cancelled", "cancel_honoured"),
    "mixed_env_batch": ("validation-batched-env", "batched_env_eval"),
    "drift_fails_batch": ("prefix-drift", "raise_has_cause"),
    "length_as_completed": ("native-token-limit-truncated", "status_recorded"),
    "generic_abort": ("trajectory-exception-isolated", "root_cause_visible"),
    "eos_doubled": ("prefix-drift", "prompts_sent"),
    "reward_first_attempt": ("nan-logprobs-retry-rewards", "rewards_recorded"),
    "resends_timed_out": ("agent-frozen", "ends_promptly"),
    "outage_as_aborted": ("agent-killed-stays-down", "outage_fails_collection"),
    "placeholder_in_group": ("group-trajectory-exception", "groups_intact"),
    "retry_edits_caller_rows": ("nan-logprobs-nan", "rows_unchanged"),
    "task_batched_answers": ("workload-out-of-order", "turns_generated"),
    "permit_released_twice": ("workload-queued-behind-concurrency", "concurrency_bounded"),
    "permit_leaked_on_failure": ("next-step-after-failed-rows", "next_steps_sound"),
    "batch_wide_group_filter": ("group-failure-spares-healthy-groups", "groups_intact"),
    "drains_before_cancel": ("collection-cancelled-while-a-row-hangs", "cancel_honoured"),
    "drift_trained": ("logprob-drift-masked", "drifted_logprobs_masked"),
    "empty_output_completed": ("run-answer-emptied", "corroborated"),
    "retry_hotter": ("nan-logprobs-retry-rewards", "retry_faithful"),
    "short_logprobs_trained": ("run-answers-unreadable", "finite_logprobs"),
    "empty_generation_hint": ("run-answers-without-output", "root_cause_visible"),
    "observation_dropped": ("native-row-failures", "conversation_carried"),
    "policy_lost_per_row": ("native-policy-killed", "no_empty_epoch"),
    "deadline_split_over_attempts": ("one-row-hangs", "row_deadline_kept"),
    "eos_appended_at_stop": ("turn-ends-at-tool-call", "turns_generated"),
}
# The scenarios that run two policy replicas -> (a known-bug collector they catch, the invariant
# that must judge FAIL); that collector's own scenario is in CAUGHT_BY.
REPLICA_SCENARIOS = {
    "policy-replica-killed": ("swallowed_exception", "accounted"),
    "policy-replica-nan-logprobs": ("nan_silent", "finite_logprobs"),
}
# Scenarios whose fault another scenario's known bug also meets -> (that collector, the invariant
# that must judge FAIL): the bug's own scenario is in CAUGHT_BY.
ALSO_CAUGHT = {
    "validation-row-hangs": ("no_deadline", "bounded"),  # one-row-hangs, in a validation pass
    # collection-cancelled-while-a-row-hangs, with every row of one agent frozen instead
    "collection-cancelled-while-agent-frozen": ("drains_before_cancel", "cancel_honoured"),
    # group-trajectory-exception's bug, met at the verifier in a group of five (SkyRL's default)
    "group-verifier-exception": ("placeholder_in_group", "groups_intact"),
    # trajectory-exception-isolated's bug, met at an answer cut off mid-body (no HTTP status)
    "run-answer-cut-off": ("gather_no_isolation", "isolated_failures"),
}
# The scenarios between hosts, which need --rollout-chaos-ray=hosts:N -> (a known-bug collector they
# catch, the invariant that must judge FAIL); that collector's own scenario is in CAUGHT_BY. A host
# that vanishes, or a cut, answers nothing: a collector with no request deadline waits for ever.
HOST_SCENARIOS = {
    "gym-host-partitioned": ("no_deadline", "bounded"),
    "policy-host-lost": ("no_deadline", "bounded"),
}
# Every scenario whose rows drift: a collector that fails the batch on one drifted row fails each.
DRIFT_SCENARIOS = ("prefix-drift", "policy-tokenize-drift", "retokenization-drift", "unrepairable-drift")

pytestmark = pytest.mark.slow


# The JUnit XML of the main job (``pytest --rollout-chaos scenarios/``: the reference collector,
# the default stack), when CI has just run it: the reference's whole catalog on the default stack
# is that very run, read here rather than run a second time.
MAIN_JOB_JUNIT = "ROLLOUT_CHAOS_MAIN_JOB_JUNIT"


def stack_options(settings: ChaosSettings) -> list[str]:
    """The options that choose ``settings``' stack."""
    return [
        f"--rollout-chaos-backend={settings.backend}",
        f"--rollout-chaos-gym={settings.gym}",
        f"--rollout-chaos-ray={settings.ray.describe()}",
        f"--rollout-chaos-policy-replicas={settings.policy_replicas}",
    ]


@pytest.fixture(scope="module")
def stack_args(chaos_settings: ChaosSettings) -> list[str]:
    """The stack this session was asked for (``pytest tests/catalog --rollout-chaos-backend=vllm``
    gates the catalog on real vLLM), passed on to the child runs."""
    return stack_options(chaos_settings)


def needing(need: Need) -> set[str]:
    """The catalog's scenarios with a fault that needs ``need``."""
    return {
        scenario.name
        for scenario in map(load_scenario, CATALOG.glob("*.chaos.yaml"))
        if any(need in registry.fault_class(step.kind).needs for step in scenario.faults)
    }


def skipped_on(settings: ChaosSettings) -> set[str]:
    """The scenarios this stack cannot run: those of Ray's faults without Ray, ``node_down`` on a
    cluster with no node this run may remove (one node, or a joined cluster), the faults between
    hosts without ``hosts:N``, and there the faults that read a server's processes from ``/proc``."""
    needs_ray = {
        scenario.name
        for scenario in map(load_scenario, CATALOG.glob("*.chaos.yaml"))
        if any(registry.fault_class(step.kind).family == "ray" for step in scenario.faults)
    }
    skipped = set(needs_ray) if not settings.ray.on else set()
    if settings.ray.on and not (settings.ray.kind in ("local", "hosts") and settings.ray.nodes >= 2):
        skipped.add("rollout-node-lost")
    if settings.ray.kind != "hosts":
        skipped |= needing(Need.HOST)
    else:  # every server runs on a host of its own, where pytest's /proc does not look
        skipped |= needing(Need.HERE)
    # A scenario's own count of policy replicas (two for REPLICA_SCENARIOS) is started for it unless
    # real NeMo Gym (given its base URLs once, at start) or an external policy (one server) makes the
    # run's own count the only one.
    if settings.gym != "embedded" or settings.policy_url is not None:
        skipped |= {
            scenario.name
            for scenario in map(load_scenario, CATALOG.glob("*.chaos.yaml"))
            if scenario.stack.policy.replicas not in (None, settings.policy_replicas)
        }
    if settings.gym != "embedded":  # real NeMo Gym's verifier scores every attempt alike
        skipped |= rescored_by_the_verifier()
        # and its vllm_model reads its extra sampling fields (stop strings) at start only
        skipped |= {
            scenario.name
            for scenario in map(load_scenario, CATALOG.glob("*.chaos.yaml"))
            if scenario.stack.policy.stop and scenario.workload.style == "gym"
        }
    # Behind NeMo Gym's legacy_agent relays (0.5 and later) an agent's exit reaches no collector:
    # a scenario judging the collector's answer to one skips there (engine.fit).
    if settings.gym == "nemo-gym" and locate(settings.gym_python).environment_relay:
        skipped |= {
            scenario.name
            for scenario in map(load_scenario, CATALOG.glob("*.chaos.yaml"))
            if judges_an_agents_exit(scenario)
        }
    # Real vLLM's strict tool calling forces each tool call's envelope as the template writes it
    # behind NeMo Gym's vllm_model, so the model's own drift almost never happens (engine.fit).
    if (
        settings.backend == "vllm"
        and settings.gym == "nemo-gym"
        and locate_vllm(settings.vllm_python).strict_tool_calling
    ):
        skipped |= {
            scenario.name
            for scenario in map(load_scenario, CATALOG.glob("*.chaos.yaml"))
            if waits_for_the_models_drift(scenario)
        }
    return skipped


def waits_for_the_models_drift(scenario: Scenario) -> bool:
    """Whether ``scenario`` re-renders prompts with no fault and witnesses their drift."""
    return (
        not scenario.faults
        and not scenario.stack.policy.splice_prefix
        and "prompt_ids_drifted" in scenario.expect.witness
    )


def rescored_by_the_verifier() -> set[str]:
    """The gym-style scenarios whose rewards differ per attempt or per row (``stack.rescore_bonus``,
    ``stack.reward_spread``): they need our resources server to answer ``/verify``."""
    return {
        scenario.name
        for scenario in map(load_scenario, CATALOG.glob("*.chaos.yaml"))
        if (scenario.stack.rescore_bonus or scenario.stack.reward_spread) and scenario.workload.style == "gym"
    }


def met_in_front_of_the_agent(name: str) -> bool:
    """Whether every fault of scenario ``name`` is a semantic one on the agents' ``/run``: the fault
    layer answers, holds or rewrites the ``/run`` the collector reads, in front of the agent, as on
    every stack. What a known-bug collector does with it is its own doing, judged on the embedded
    servers; a real NeMo Gym stack adds nothing there but its start."""
    faults = load_scenario(CATALOG / f"{name}.chaos.yaml").faults
    return bool(faults) and all(
        registry.fault_class(step.kind).family == "semantic" and (step.target or "").endswith("agent")
        for step in faults
    )


def judges_an_agents_exit(scenario: Scenario) -> bool:
    """Whether ``scenario`` ends an agent's process and lists an invariant judging the answer to that."""
    judging = any(
        getattr(invariants.BY_NAME[name], "judges_exits", False) for name in scenario.expect.invariants
    )
    return judging and any(
        getattr(registry.fault_class(step.kind), "terminates_target", False)
        and (step.target == "agent" or step.target in DEFAULT_AGENTS)
        for step in scenario.faults
    )


@pytest.fixture(scope="module")
def known_bug_stack_args(
    stack_args: list[str], chaos_settings: ChaosSettings, request: pytest.FixtureRequest
) -> list[str]:
    """``stack_args`` for the known-bug runs. On real vLLM they share this session's policy server
    (``--rollout-chaos-policy-url``) instead of each loading the model again; their scenarios aim
    no process fault at the policy, so nothing is lost. On a local Ray cluster they join this
    session's (by its address) instead of each starting one; none of their scenarios removes a node."""
    args = list(stack_args)
    if chaos_settings.ray.kind == "local":
        cluster = request.getfixturevalue("chaos_ray").cluster
        args = [arg for arg in args if not arg.startswith("--rollout-chaos-ray=")]
        args.append(f"--rollout-chaos-ray={cluster.address}")
    if chaos_settings.backend != "vllm" or chaos_settings.policy_url is not None:
        return args
    policy = request.getfixturevalue("chaos_policy")
    return [*args, f"--rollout-chaos-policy-url={policy.url}"]


def test_every_known_bug_collector_has_a_scenario_that_catches_it() -> None:
    modules = {
        path.stem for path in (REPO / "fixtures" / "collectors").glob("*.py") if not path.stem.startswith("_")
    }
    assert set(CAUGHT_BY) == set(KNOWN_BUGS) == modules - set(FOUND_BY_FUZZ)
    for collector, (scenario, invariant) in CAUGHT_BY.items():
        assert KNOWN_BUGS[collector] == invariant, collector
        assert (CATALOG / f"{scenario}.chaos.yaml").exists(), scenario


def test_the_catalog_has_at_least_sixteen_scenarios() -> None:
    assert len(list(CATALOG.glob("*.chaos.yaml"))) >= 16


def test_reference_collector_passes_the_whole_catalog(
    tmp_path: Path, stack_args: list[str], chaos_settings: ChaosSettings
) -> None:
    main_job = os.environ.get(MAIN_JOB_JUNIT)
    if main_job and stack_args == stack_options(ChaosSettings()):
        verdicts = parse_junit(Path(main_job))
    else:
        verdicts = run_catalog(tmp_path, target="reference", stack_args=stack_args)
    assert len(verdicts) == len(list(CATALOG.glob("*.chaos.yaml")))
    skipped = {name: result.skipped for name, result in verdicts.items() if result.skipped is not None}
    assert set(skipped) == skipped_on(chaos_settings), skipped
    failed = {
        name: result.message for name, result in verdicts.items() if not result.passed and name not in skipped
    }
    assert not failed, "\n\n".join(f"{name}:\n{message}" for name, message in failed.items())
    for result in verdicts.values():
        if result.skipped is not None:
            continue
        assert result.invariants, f"{result.name}: no invariant verdicts recorded"
        # a standing invariant may find nothing to judge; one the scenario lists may not (vacuous)
        assert set(result.invariants.values()) <= {"PASS", "NOT_JUDGED"}, result


@pytest.mark.parametrize("collector", sorted(CAUGHT_BY))
def test_known_bug_collector_fails_its_scenario_and_passes_the_baseline(
    tmp_path: Path, collector: str, known_bug_stack_args: list[str], chaos_settings: ChaosSettings
) -> None:
    scenario, invariant = CAUGHT_BY[collector]
    if chaos_settings.gym != "embedded" and scenario in rescored_by_the_verifier():
        pytest.skip(
            f"{scenario} needs our resources server to score a row's attempts differently; real NeMo "
            "Gym's verifier scores them alike, so it is pinned on the embedded servers"
        )
    if scenario in skipped_on(chaos_settings):
        pytest.skip(f"{scenario} does not run on this stack (see skipped_on), so it catches nothing here")
    if chaos_settings.gym != "embedded" and met_in_front_of_the_agent(scenario):
        pytest.skip(
            f"{scenario}'s faults act in the fault layer on the agents' /run, alike on every stack: "
            f"{collector} is judged on the embedded servers"
        )
    verdicts = run_catalog(
        tmp_path,
        target=f"fixtures.collectors.{collector}:factory",
        scenarios=[scenario, "baseline"],
        stack_args=known_bug_stack_args,
    )
    exposed = verdicts[scenario]
    assert not exposed.passed, f"{collector} passed {scenario}: the scenario does not catch its bug"
    assert exposed.invariants.get(invariant) == "FAIL", (
        f"{collector} failed {scenario}, but {invariant} judged {exposed.invariants.get(invariant)}: "
        f"{exposed.invariants}\n{exposed.message}"
    )
    baseline = verdicts["baseline"]
    failing = {name for name, status in baseline.invariants.items() if status in ("FAIL", "UNKNOWN")}
    drift_exposes = {"prefix_consistent"} | ({invariant} if collector == "drift_fails_batch" else set())
    if chaos_settings.gym == "nemo-gym" and failing and failing <= drift_exposes:
        # Real NeMo Gym's vllm_model re-renders every earlier turn, so even the baseline has real
        # retokenization drift there (what retokenization-drift sets up on our servers). A known-bug
        # collector that does not repair it fails by prefix_consistent: prefix_passthrough's own
        # bug, and for the others a second real bug, not the one they plant; drift_fails_batch
        # raises on it, its own bug. Anything else counts.
        return
    assert baseline.passed, f"{collector} fails even without a fault:\n{baseline.message}"


@pytest.mark.parametrize("scenario", sorted(REPLICA_SCENARIOS))
def test_known_bug_collector_fails_each_replica_scenario(
    tmp_path: Path, scenario: str, known_bug_stack_args: list[str]
) -> None:
    collector, invariant = REPLICA_SCENARIOS[scenario]
    if "--rollout-chaos-gym=nemo-gym" in known_bug_stack_args:
        pytest.skip(
            "pinned on the embedded servers: under real NeMo Gym's model server these known bugs are caught "
            "by other invariants first (a dead replica holds the collector past its deadline: bounded)"
        )
    # Their replicas are started by the run (a shared external policy would be one server), two of
    # them from the start: real NeMo Gym is given its model server's base URLs once.
    shared = ("--rollout-chaos-policy-url=", "--rollout-chaos-policy-replicas=")
    args = [arg for arg in known_bug_stack_args if not arg.startswith(shared)]
    args.append("--rollout-chaos-policy-replicas=2")
    verdicts = run_catalog(
        tmp_path, target=f"fixtures.collectors.{collector}:factory", scenarios=[scenario], stack_args=args
    )
    exposed = verdicts[scenario]
    assert exposed.skipped is None, f"{scenario} skipped: {exposed.skipped}"
    assert exposed.invariants.get(invariant) == "FAIL", (
        f"{collector} on {scenario}: {invariant} judged {exposed.invariants.get(invariant)}: "
        f"{exposed.invariants}\n{exposed.message}"
    )


@pytest.mark.parametrize("scenario", sorted(ALSO_CAUGHT))
def test_known_bug_collector_fails_each_scenario_also_caught(
    tmp_path: Path, scenario: str, known_bug_stack_args: list[str], chaos_settings: ChaosSettings
) -> None:
    collector, invariant = ALSO_CAUGHT[scenario]
    if scenario in skipped_on(chaos_settings):
        pytest.skip(f"{scenario} does not run on this stack (see skipped_on), so it catches nothing here")
    verdicts = run_catalog(
        tmp_path,
        target=f"fixtures.collectors.{collector}:factory",
        scenarios=[scenario],
        stack_args=known_bug_stack_args,
    )
    exposed = verdicts[scenario]
    assert exposed.skipped is None, f"{scenario} skipped: {exposed.skipped}"
    assert exposed.invariants.get(invariant) == "FAIL", (
        f"{collector} on {scenario}: {invariant} judged {exposed.invariants.get(invariant)}: "
        f"{exposed.invariants}\n{exposed.message}"
    )


@pytest.mark.parametrize("collector", sorted({collector for collector, _ in HOST_SCENARIOS.values()}))
def test_known_bug_collector_fails_each_scenario_between_hosts(
    tmp_path: Path, collector: str, known_bug_stack_args: list[str], chaos_settings: ChaosSettings
) -> None:
    if chaos_settings.ray.kind != "hosts":
        pytest.skip(
            "the scenarios between hosts need --rollout-chaos-ray=hosts:N (CI's Ray stage runs them so)"
        )
    scenarios = {
        name: invariant for name, (caught, invariant) in HOST_SCENARIOS.items() if caught == collector
    }
    verdicts = run_catalog(  # one run of the collector, its hosts started once, for all its scenarios
        tmp_path,
        target=f"fixtures.collectors.{collector}:factory",
        scenarios=list(scenarios),
        stack_args=known_bug_stack_args,
    )
    for scenario, invariant in scenarios.items():
        exposed = verdicts[scenario]
        assert exposed.skipped is None, f"{scenario} skipped: {exposed.skipped}"
        assert exposed.invariants.get(invariant) == "FAIL", (
            f"{collector} on {scenario}: {invariant} judged {exposed.invariants.get(invariant)}: "
            f"{exposed.invariants}\n{exposed.message}"
        )


# Named like the other known-bug tests, which CI leaves out on real vLLM: whether the model drifts
# there is the engine's to decide, and a bug of the collector's is pinned on the stacks that drift.
def test_known_bug_collector_fails_every_drift_scenario_by_failing_the_batch_on_one_drifted_row(
    tmp_path: Path, known_bug_stack_args: list[str]
) -> None:
    verdicts = run_catalog(
        tmp_path,
        target="fixtures.collectors.drift_fails_batch:factory",
        scenarios=list(DRIFT_SCENARIOS),
        stack_args=known_bug_stack_args,
    )
    judged = {name: verdicts[name].invariants.get("raise_has_cause") for name in DRIFT_SCENARIOS}
    assert judged == dict.fromkeys(DRIFT_SCENARIOS, "FAIL"), "\n\n".join(
        f"{name}:\n{verdicts[name].message}" for name in DRIFT_SCENARIOS
    )
