"""The ``skyrl`` adapter drives SkyRL's real ``SkyRLGymGenerator`` and tells its trees apart.

On SkyRL before PR #1986, and at its head with ``generator.skip_failed_rollouts`` off (the
default), one raising rollout takes the training step down, so ``verifier-exception-isolated``
fails by ``isolated_failures``; with the flag on it passes (``test_gates`` pins both gates over
both trees, the baseline passing on each). An
adapter that swallowed SkyRL's exception would make the base tree pass too: the fidelity test
shows that it does, so the gate is what catches such an adapter. With the flag on, a batch whose
every rollout failed still raises: no batch of placeholders is handed on. GRPO groups go
through SkyRL's own ``n_samples_per_prompt``, each copy of a prompt seeded from its own row; the
verdicts on groups are pinned over the catalog's group scenarios, their faults moved where SkyRL's
loop meets them (the adapter's retargets), and a twin under ``sequence_mean``.

The fast tests read hand-made ``GeneratorOutput``s with no SkyRL at all; the slow ones unpack the
pinned trees (``_skyrl_trees``) and run child pytest sessions on the full stack, skipping, with
the reason, where this interpreter cannot run SkyRL (Python 3.12 and its dependencies).
"""

from __future__ import annotations

import asyncio
import re
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos.collector.abilities import declared
from pytest_rollout_chaos.collector.adapters import skyrl, skyrl_output
from pytest_rollout_chaos.engine.fit import collector_unfit
from pytest_rollout_chaos.scenario.model import load_scenario
from tests.catalog._verdicts import CATALOG, CATALOG_NAMES, ScenarioVerdicts, run_catalog
from tests.collector.adapters import _skyrl_trees as trees
from tests.collector.adapters._trees import REPO


# -- hand-made GeneratorOutputs: what the adapter reads back -----------------------------------------
def two_turns(stop_reason: str = "stop") -> dict[str, Any]:
    """Prompt [1, 2]; the model writes [10, 11], a tool answers [20], the model writes [12]."""
    return {
        "prompt_token_ids": [[1, 2]],
        "response_ids": [[10, 11, 20, 12]],
        "loss_masks": [[1, 1, 0, 1]],
        "rollout_logprobs": [[-0.5, -0.25, 0.0, -1.0]],
        "rewards": [[0.0, 0.0, 0.0, 1.0]],
        "stop_reasons": [stop_reason],
    }


def test_each_run_of_loss_mask_one_is_a_turn_with_everything_before_it_as_its_prompt() -> None:
    rollout = skyrl_output.rollout_of(two_turns(), 0, 7, skyrl_output.LoggedFailures())
    assert (rollout.row_index, rollout.status, rollout.reward, rollout.error) == (7, "completed", 1.0, None)
    assert [(t.prompt_token_ids, t.generation_token_ids, t.generation_log_probs) for t in rollout.turns] == [
        ([1, 2], [10, 11], [-0.5, -0.25]),
        ([1, 2, 10, 11, 20], [12], [-1.0]),
    ]


def test_a_float_reward_and_no_logprobs_are_read_as_they_are() -> None:
    output = {**two_turns(), "rewards": [0.5], "rollout_logprobs": None}
    rollout = skyrl_output.rollout_of(output, 0, 0, skyrl_output.LoggedFailures())
    assert rollout.reward == 0.5
    assert [turn.generation_log_probs for turn in rollout.turns] == [[], []]


@pytest.mark.parametrize(
    ("stop_reason", "status"), [("stop", "completed"), ("length", "truncated"), ("abort", "aborted")]
)
def test_stop_reasons_map_to_statuses(stop_reason: str, status: str) -> None:
    rollout = skyrl_output.rollout_of(two_turns(stop_reason), 0, 3, skyrl_output.LoggedFailures())
    assert rollout.status == status
    assert (rollout.error is None) == (status != "aborted")
    if status == "aborted":
        assert rollout.error == "SkyRL handed back row 3 with stop_reason 'abort'"


@dataclass
class LogMessage:
    """The part of a loguru message a sink reads."""

    record: dict[str, Any]


def test_a_placeholder_is_an_aborted_row_naming_what_skyrl_logged_for_that_rollout() -> None:
    """PR #1986's placeholder is seen for what it is, never a healthy rollout."""
    placeholder = {
        "prompt_token_ids": [[1], [1]],
        "response_ids": [[10], [1]],
        "loss_masks": [[1], [0]],
        "rollout_logprobs": [[-0.1], [0.0]],
        "rewards": [[1.0], [0.0]],
        "stop_reasons": ["stop", "rollout_error"],
    }
    failures = skyrl_output.LoggedFailures()
    for index, cause in ((0, "ValueError: not this one"), (1, "GymRequestError: verifier crashed")):
        failures.record(
            LogMessage(
                {"message": f"Rollout {index} failed with {cause}. Substituting a placeholder trajectory."}
            )
        )
    rollout = skyrl_output.rollout_of(placeholder, 1, 9, failures)
    assert (rollout.row_index, rollout.status, rollout.turns, rollout.reward) == (9, "aborted", [], 0.0)
    assert rollout.error is not None
    assert "placeholder trajectory (stop_reason='rollout_error'" in rollout.error
    assert "rollout 1 failed with GymRequestError: verifier crashed" in rollout.error
    assert "not this one" not in rollout.error
    silent = skyrl_output.rollout_of(placeholder, 1, 9, skyrl_output.LoggedFailures()).error
    assert silent is not None
    assert "SkyRL logged no cause for it" in silent


@pytest.mark.parametrize(
    ("scenario", "reaches"),
    [
        ("verifier-exception-isolated", True),  # the environment's /verify
        ("policy-503-storm", True),  # every model call
        ("trajectory-exception-isolated", True),  # an agent's /run: the environment's /seed_session
        ("policy-nan-logprobs", True),  # /v1/chat/completions: SkyRL's /inference/v1/generate
        ("model-malformed-json", True),  # a model answer that no longer parses: a generate answer's
        ("model-link-reset", True),  # both hops of a model call: its one, on the policy's 6th request
        ("policy-replica-killed", False),  # a second replica: its client is given the first only
        ("run-answer-cut-off", False),  # the /run answer's body: no answer of SkyRL's loop
        ("group-trajectory-exception", True),
        ("group-nan-logprobs", True),  # the /run answer's logprobs: /inference/v1/generate's
        ("short-results", False),  # the Gym client
        ("group-agent-killed", False),  # a NeMo Gym agent's process: SkyRL runs none
        ("run-answer-emptied", False),  # the /run answer's own body
        ("validation-row-hangs", True),  # through SkyRL's RayPPOTrainer.eval
        ("validation-batched-env", False),  # a batched environment step: SkyRL has none
    ],
)
def test_only_faults_on_skyrls_own_requests_reach_it(scenario: str, reaches: bool) -> None:
    """Where the adapter's retargets move them (``engine.retarget``)."""
    why = collector_unfit(load_scenario(CATALOG / f"{scenario}.chaos.yaml"), declared(skyrl.SkyRLCollector))
    assert (why is None) == reaches, why


# -- the real trees on the full stack ----------------------------------------------------------------
@pytest.fixture(scope="module")
def skyrl_trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The pinned trees, unpacked; skip, saying why, where SkyRL cannot run."""
    into = tmp_path_factory.mktemp("skyrl-trees")
    return {name: trees.unpack(name, into) for name in (trees.BASE, trees.HEAD, trees.MAIN)}


def upstream(tree: Path) -> list[str]:
    """The run on ``tree``. SkyRL's own HTTP sessions, which its detached tasks reopen after a step
    raised or was cancelled (``RemoteInferenceClient._get_session``), are dropped unclosed; the
    engine logs each as the collection's (``engine.run.finalized``), so none fails a later
    scenario, and the runs here keep warnings as errors, as a user's run does."""
    return [f"--rollout-chaos-upstream={tree}"]


# Where SkyRL's step raises, its other trajectories run on (tqdm.gather leaves them, and their
# environment requests run in threads no cancel stops): whether their last requests (the policy's
# /finish_session) land just before the collection's end or just after it is timing, not SkyRL's
# code. Seen both ways under load (resources-exit-zero: four, 0.53 s after the end, in a full CI
# run; trajectory-exception-isolated earlier), so this invariant is left out where the step raised.
TIMED_AFTER_A_RAISE = "quiet_after_end"


def red(result: ScenarioVerdicts) -> set[str]:
    """The invariants ``result`` failed, but ``TIMED_AFTER_A_RAISE`` where the collector raised."""
    failed = {invariant for invariant, status in result.invariants.items() if status == "FAIL"}
    return failed - {TIMED_AFTER_A_RAISE} if "outcome: the collector raised" in result.message else failed


def passed_but_for_timing(result: ScenarioVerdicts) -> bool:
    """Passed, or failed by ``TIMED_AFTER_A_RAISE`` alone after a raise: an invariant's failure,
    no expectation missed."""
    if result.passed:
        return True
    only_verdicts = "InvariantViolation" in result.message and not re.search(
        r"^\s*expected:", result.message, re.MULTILINE
    )
    return result.skipped is None and only_verdicts and not red(result)


@pytest.mark.slow
def test_an_adapter_that_swallows_skyrls_exception_would_make_the_base_tree_look_fixed(
    tmp_path: Path, skyrl_trees: dict[str, Path]
) -> None:
    """Fidelity: turning the raising rollout into a placeholder in the adapter hides the bug on the
    base tree, so the SkyRL gate (``test_gates``: base red by isolated_failures) fails for it."""
    verdicts = run_catalog(
        tmp_path,
        target="tests.collector.adapters._skyrl_trees:swallowing_factory",
        scenarios=[trees.SCENARIO],
        stack_args=upstream(skyrl_trees[trees.BASE]),
    )[trees.SCENARIO]
    assert verdicts.invariants["isolated_failures"] == "PASS", verdicts.message


WHOLE_BATCH_TEST = textwrap.dedent(
    """
    import pytest

    @pytest.mark.asyncio
    @pytest.mark.chaos_fault("http_error", "policy", status=500, every=1)
    async def test_every_rollout_fails(chaos_collector, chaos_gym):
        with pytest.raises(RuntimeError, match="All 4 rollouts in the batch failed") as raised:
            await chaos_collector.collect(chaos_gym.rows("calculator", 4), mode="train")
        assert "500" in str(raised.value.__cause__), repr(raised.value.__cause__)

    @pytest.mark.asyncio
    @pytest.mark.chaos_fault("trajectory_exception", "resources", route="/verify", row=1,
                             message="reward function crashed on row 1")
    async def test_one_rollout_fails(chaos_collector, chaos_gym):
        rollouts = await chaos_collector.collect(chaos_gym.rows("calculator", 4), mode="train")
        assert [r.status for r in rollouts].count("aborted") == 1, rollouts
        assert rollouts[1].status == "aborted" and not rollouts[1].turns
        # SkyRL trains the placeholder: in the batch its policy update gets, loss mask [0]
        assert rollouts[1].in_train_batch and rollouts[1].loss_mask == [0], rollouts[1]
        assert all(r.in_train_batch and any(r.loss_mask) for r in rollouts if r.status != "aborted")
        assert "reward function crashed on row 1" in rollouts[1].error, rollouts[1].error
        assert all(r.turns for r in rollouts if r.status != "aborted")
    """
)


@pytest.mark.slow
def test_with_the_flag_on_a_batch_of_only_failures_raises_and_one_failure_is_a_placeholder(
    pytester: pytest.Pytester, skyrl_trees: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_flag_on=WHOLE_BATCH_TEST)
    result = pytester.runpytest_subprocess(
        "--rollout-chaos",
        "--rollout-chaos-target=skyrl_skip_failed_rollouts",
        *upstream(skyrl_trees[trees.HEAD]),
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore:client.loop property is deprecated:DeprecationWarning",
        timeout=300,
    )
    result.assert_outcomes(passed=2)


@pytest.mark.slow
def test_the_flag_on_a_tree_without_it_is_a_usage_error_naming_the_pr(
    pytester: pytest.Pytester, skyrl_trees: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    result = pytester.runpytest_subprocess(
        "--rollout-chaos",
        "--rollout-chaos-target=skyrl_skip_failed_rollouts",
        *upstream(skyrl_trees[trees.BASE]),
        "-p",
        "no:cacheprovider",
        str(CATALOG / "baseline.chaos.yaml"),
        timeout=300,
    )
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*generator.skip_failed_rollouts*PR #1986*--target skyrl*"])


# -- GRPO groups on the full stack: the catalog's group scenarios, and a twin under sequence_mean ------
GROUP_TWINS = {
    "skyrl-placeholder-sequence-mean": """
        name: skyrl-placeholder-sequence-mean
        description: >
          verifier-exception-isolated under SkyRL's sequence_mean loss reduction: the placeholder
          SkyRL keeps in the train batch counts in the loss's divisor, loss mask [0] or not.
        tags: [semantic, isolation]
        upstream: ["NovaSky-AI/SkyRL#1986"]
        workload:
          rows_per_task: 4
          tasks: [calculator, echo]
          trainer_config:
            skyrl.trainer.algorithm.loss_reduction: sequence_mean
        faults:
          - kind: trajectory_exception
            target: resources
            route: /verify
            row: 2
            message: "reward function crashed on row 2"
        expect:
          invariants: [train_batch_sound, isolated_failures, accounted, root_cause_visible]
          within_s: 30
    """,
}
CATALOG_GROUPS = ["group-agent-killed"]  # a NeMo Gym agent's process: nothing of SkyRL's to kill

# SkyRL's verdicts that fail on groups (of 5 or 4 in the catalog, of 1 in the twin), by target and
# tree, with upstream's reasons:
# - group-verifier-exception and group-trajectory-exception (the agent's /run moved onto the
#   member's environment /seed_session), flag off (PR #1986's base): SkyRLGymGenerator.generate
#   gathers the agent loops with tqdm.gather, so the one raising member takes the step down (the
#   siblings run on): isolated_failures and raise_has_cause, as on verifier-exception-isolated. No
#   train batch, so groups_intact holds.
# - the same, flag on (PR #1986's head): _substitute_failed_rollouts puts a placeholder (reward 0,
#   loss mask [0]) in the failed rollout's place, its uid kept, and the trainer computes GRPO
#   advantages by uid (trainer.py, compute_advantages_and_returns, index=uids): the placeholder's
#   reward enters its siblings' baseline. groups_intact fails, and train_batch_sound, read at the
#   batch the policy update gets: its zero loss mask under token_mean trains nothing, but it is not
#   alone in its group.
# - skyrl-placeholder-sequence-mean, flag on: one generation per prompt, but under
#   loss_reduction sequence_mean the placeholder counts in the divisor: train_batch_sound fails
#   naming the setting (under the default token_mean, verifier-exception-isolated passes it).
# - group-nan-logprobs (the relayed logprobs moved onto /inference/v1/generate's), flag off:
#   RemoteInferenceClient._post parses each answer with orjson, which rejects a NaN literal, and
#   retries an unparsable answer 30 times a second apart (_DATA_PLANE_RETRIES): the step stalls
#   past the 30 s deadline (bounded, ends_promptly); no NaN is ever handed on. Nothing returned or
#   raised, so groups_intact is not judged.
GROUP_RUNS = {
    ("skyrl", trees.BASE): {
        "group-verifier-exception": ({"isolated_failures", "raise_has_cause"}, "PASS"),
        "group-trajectory-exception": ({"isolated_failures", "raise_has_cause"}, "PASS"),
        "group-nan-logprobs": ({"bounded", "ends_promptly"}, "NOT_JUDGED"),
    },
    ("skyrl_skip_failed_rollouts", trees.HEAD): {
        "group-verifier-exception": ({"groups_intact", "train_batch_sound"}, "FAIL"),
        "group-trajectory-exception": ({"groups_intact", "train_batch_sound"}, "FAIL"),
        "skyrl-placeholder-sequence-mean": ({"train_batch_sound"}, "NOT_JUDGED"),
    },
}


@pytest.mark.slow
@pytest.mark.parametrize(("target", "tree"), sorted(GROUP_RUNS))
def test_skyrl_meets_groups_as_its_own_n_samples_per_prompt_does(
    target: str, tree: str, tmp_path: Path, skyrl_trees: dict[str, Path]
) -> None:
    """SkyRL makes each group from one prompt; the verdicts are its code's (``GROUP_RUNS``). The
    catalog's group scenarios meet SkyRL's loop where the adapter's retargets move their faults;
    one that kills an agent's process skips by reach."""
    expected = GROUP_RUNS[(target, tree)]
    files = []
    for name in [name for name in expected if name in GROUP_TWINS]:
        files.append(tmp_path / f"{name}.chaos.yaml")
        files[-1].write_text(textwrap.dedent(GROUP_TWINS[name]).lstrip())
    (tmp_path / "runs").mkdir()
    verdicts = run_catalog(
        tmp_path / "runs",
        target=target,
        scenarios=[*CATALOG_GROUPS, *(name for name in expected if name not in GROUP_TWINS)],
        files=files,
        stack_args=upstream(skyrl_trees[tree]),
    )
    for name in CATALOG_GROUPS:
        skipped = verdicts[name].skipped
        assert skipped is not None, verdicts[name].message
        assert "cannot reach the collector under test: it acts on" in skipped, skipped
        assert "not moved to them: it acts on a NeMo Gym agent's server" in skipped, skipped
    for name, (failing, groups) in expected.items():
        result = verdicts[name]
        assert result.skipped is None, result.skipped
        assert red(result) == failing, f"{target} on {tree}, {name}:\n{result.message}"
        assert result.invariants["groups_intact"] == groups, result.message
        if "train_batch_sound" in failing:  # the placeholder, named, and why it moves the gradient
            assert "is in the train batch with reward 0.0, but it came back aborted" in result.message
            setting = "trainer.algorithm.loss_reduction = 'sequence_mean' counts it in the loss's divisor"
            assert (setting in result.message) == name.endswith("sequence-mean"), result.message


# -- SkyRL's main (a9564572, PR #1986 not merged) over the whole catalog -----------------------------
# Measured: what meets SkyRL's loop (its own requests, and the faults its retargets move there) is
# judged as on the PR's base; the rest skips by reach, saying why.
MAIN_PASSED = {
    "baseline",
    "native-token-limit-truncated",
    "policy-not-ready-at-start",
    "token-limit-truncated",
    "latency-under-load",  # its model calls and environment requests slowed
    "collection-cancelled",  # the cancel ends SkyRL's step with CancelledError at once
    "collection-cancelled-while-a-row-hangs",
    "resources-exit-zero",  # the environment's request cut: the step raises, naming it
    "truncated-run-response",  # an environment answer cut short: IncompleteRead, raised
    "workload-queued-behind-concurrency",  # RemoteInferenceClient retries an unparsable answer
    "workload-out-of-order",  # each reward the /verify answer of its own row (rewards_recorded)
    # the model server's answer cut in half, moved onto a generate answer: RemoteInferenceClient._post
    # retries a 200 orjson cannot parse a second later (_DATA_PLANE_RETRIES), and the row completes
    "model-malformed-json",
    # stop strings in SkyRL's own sampling_params.stop (get_vllm_sampling_params keeps them in the
    # text): agent_loop appends an EOS, loss mask 0, after a turn that ends at one, and the next
    # prompt extends that turn with it (prompts_sent holds each prompt to what generate was sent)
    "turn-ends-at-tool-call",
    # the agents' link to the resources server down, moved onto the environment's: /seed_session is
    # refused, and env.init's URLError goes out of agent_loop through tqdm.gather: the step raises it
    "resources-down",
}
ISOLATION = {"isolated_failures", "raise_has_cause"}
STALLED = {"bounded", "ends_promptly"}
MAIN_FAILED = {
    # one raising rollout (the verifier's 500, a policy 503, a trajectory's environment init) takes
    # the step down: SkyRL #1613
    "verifier-exception-isolated": ISOLATION,
    "trajectory-exception-isolated": ISOLATION,
    "policy-503-storm": ISOLATION,  # its 503s fall at random
    "group-verifier-exception": ISOLATION,  # in a group of five
    "group-trajectory-exception": ISOLATION,  # in a group of four
    "next-step-after-failed-rows": ISOLATION,
    "native-train-nan-logprobs": ISOLATION,  # its 30 retries of the unparsable answer, then a raise
    "one-row-hangs": {"isolated_failures"},  # the environment's request deadline, raised
    # the same in RayPPOTrainer.eval: evaluate awaits the generator's generate, whose tqdm.gather
    # raises the hung row's TimeoutError out of env.init, and the whole evaluation with it
    "validation-row-hangs": {"isolated_failures"},
    # the policy SIGKILLed: SkyRL's client re-sends each generate every second and never gives up
    "native-policy-killed": STALLED,
    # no deadline on a model call (aiohttp's total=None): a black-holed link holds the step forever
    "model-link-blackhole": STALLED,
    # its model link reset once all six rows are under way: RemoteInferenceClient._post re-sends a
    # generate cut by ServerDisconnectedError or ClientOSError a second later, 30 times, each reset
    # again, and raises after about 40 s: past the 30 s deadline
    "model-link-reset": STALLED,
    # a NaN, an Infinity or a 500 on every generate of a row: 30 retries a second apart, past 30 s
    "nan-logprobs-nan": STALLED,
    "nan-logprobs-inf": STALLED,
    "nan-logprobs-http-500": STALLED,
    "policy-nan-logprobs": STALLED,
    "group-nan-logprobs": STALLED,
    "group-failure-spares-healthy-groups": STALLED,
    # a null logprob parses: SkyRL hands it on in a completed rollout
    "nan-logprobs-null": {"finite_logprobs"},
    # no check of the engine's logprobs against the trainer's: the drifted row is trained
    "logprob-drift-masked": {"drifted_logprobs_masked"},
    # no wait for the policy, and an error status is not retried: the gateway's first 504 to a
    # generate takes the step down (its expectation fails; every row failed on the servers, a cause)
    "policy-gateway-not-ready": set(),
}
# no counterpart in SkyRL's loop: the model server's re-rendering (retokenization-drift), the
# verifier's rescoring of an attempt thrown away (the two retry-rewards scenarios); a batched
# environment step (validation-batched-env: SkyRL steps each trajectory's environment alone)
MAIN_SKIPS = (
    "cannot reach the collector under test",
    "has no counterpart in the collector under test",
    skyrl.NO_BATCHED_STEP,
)


# The whole catalog in one child run on four workers of its own: its nine stalled scenarios each
# wait out their 30 s deadline doing nothing, so they wait side by side (the whole took 324 s on
# one worker, 129 s on four, with the same verdicts).
CATALOG_WORKERS = ["-n", "4"]


@pytest.mark.slow
def test_the_whole_catalog_on_skyrls_main(tmp_path: Path, skyrl_trees: dict[str, Path]) -> None:
    """Main's verdicts (``MAIN_*``): the baseline green and judged (multi-turn rows through SkyRL's
    generator, read at the batch its policy update gets), #1613 still open, 35 of the catalog
    judged (the adapter's retargets), none vacuous, the rest skipping, saying why."""
    verdicts = run_catalog(
        tmp_path, target="skyrl", stack_args=[*upstream(skyrl_trees[trees.MAIN]), *CATALOG_WORKERS]
    )
    assert sorted(verdicts) == CATALOG_NAMES, "each scenario of the catalog gives a verdict"
    passed = {name for name, result in verdicts.items() if passed_but_for_timing(result)}
    moved = (passed - {"policy-503-storm"}) ^ MAIN_PASSED
    assert not moved, {name: verdicts[name].skipped or verdicts[name].message for name in moved}
    assert verdicts["baseline"].invariants["prefix_consistent"] == "PASS"
    assert verdicts["baseline"].invariants["train_batch_sound"] == "PASS"
    for name, failing in MAIN_FAILED.items():
        result = verdicts[name]
        failed = red(result)
        assert failed == failing or (name == "policy-503-storm" and not failed), (name, result.message)
    rest = set(verdicts) - MAIN_PASSED - set(MAIN_FAILED)
    unexpected = {
        name: verdicts[name].skipped or verdicts[name].message
        for name in sorted(rest)
        if not any(reason in (verdicts[name].skipped or "") for reason in MAIN_SKIPS)
    }
    assert not unexpected, unexpected
    judged = {name for name, result in verdicts.items() if result.skipped is None}
    assert judged == MAIN_PASSED | set(MAIN_FAILED), sorted(judged)


def test_thirty_five_of_the_catalog_are_judged_on_main() -> None:
    assert len(MAIN_PASSED | set(MAIN_FAILED)) == len(MAIN_PASSED) + len(MAIN_FAILED) == 35
    assert MAIN_PASSED | set(MAIN_FAILED) <= set(CATALOG_NAMES)


class _Client:
    """What ``closing`` uses of RemoteInferenceClient: a session that a request reopens."""

    def __init__(self) -> None:
        self.open = False
        self.closed = 0

    async def request(self) -> None:
        self.open = True  # _get_session makes a new session once the last one is closed

    async def teardown(self) -> None:
        self.open = False
        self.closed += 1


def test_a_session_a_sibling_reopens_after_the_step_raised_is_closed_with_the_loop() -> None:
    """The raise goes on unchanged, the sibling runs on, and its session does not outlive the loop."""
    client = _Client()

    async def step() -> None:
        async def sibling() -> None:
            await asyncio.sleep(0.01)
            await client.request()
            await asyncio.sleep(3600)  # still running when the runner ends the loop

        client.sibling = asyncio.create_task(sibling())  # type: ignore[attr-defined]
        async with skyrl.closing(client, types.SimpleNamespace(env_executor=None)):
            await client.request()
            raise ValueError("one rollout raised")

    async def run() -> None:
        with pytest.raises(ValueError, match="one rollout raised"):
            await step()
        await asyncio.sleep(0.05)
        assert client.open, "the sibling ran on and reopened the session"

    asyncio.run(run())
    assert not client.open
    assert client.closed == 2
