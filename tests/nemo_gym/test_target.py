"""The ``nemo_gym`` target on real NeMo Gym: NeMo Gym's own ``RolloutCollectionHelper`` collects the
baseline through the stack's head server and links, in a pytest subprocess, and the run's JSON says
whose Gym client it was. Afterwards no collection process is left.

Baseline is judged as on any collector, with one difference that is NeMo Gym's: its ``vllm_model``
re-renders every prompt through the policy's ``/tokenize`` and hands the ids back unrepaired, so a
tool call the chat template renders differently from how the tiny policy wrote it drifts the next
turn's prefix (``prefix_consistent``), in some calculator rows of some runs. Every other verdict
must pass.

Some catalog scenarios fail on this target by NeMo Gym's own code (docs/gating.md, "NeMo Gym's own
collection under the catalog"); a few quick ones are run here and must fail by exactly the
invariants argued there, for the reason argued there, so that the table stays true.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos import preflight
from pytest_rollout_chaos.collector.adapters.nemo_gym import PROGRAM
from pytest_rollout_chaos.servers.nemo_gym.locate import GymPython
from pytest_rollout_chaos.settings import ChaosSettings
from tests.catalog._verdicts import run_catalog
from tests.nemo_gym._processes import started_here

pytestmark = pytest.mark.slow  # runs a scenario on the whole NeMo Gym stack

NEMO_GYMS_OWN = "prefix_consistent"  # drift NeMo Gym's vllm_model passes through (module docstring)
DRIFT = "prefix drift passed through"

ARGUED = {
    # run_examples awaits each /run in completion order and raise_for_status raises on a 500: the
    # first failed row ends the collection
    "trajectory-exception-isolated": (
        {"isolated_failures", "raise_has_cause"},
        r"raised ClientResponseError: 500, .*/run'",
    ),
    # get_response_json is orjson.loads, which takes no NaN literal: that row's raise ends it too
    "nan-logprobs-nan": (
        {"isolated_failures", "raise_has_cause"},
        r"raised JSONDecodeError: .* in get_response_json",
    ),
    # run_examples hands back whatever /run answered, unchecked: a response without output is a result
    "run-answers-without-output": (
        {"corroborated"},
        r"^the collector returned 4 rollouts for 4 rows \(4 completed\)$",
    ),
    # the drifted prompt ids of a /run answer come back as they came: nothing compares them or aborts
    "prefix-drift": ({"prefix_consistent", "prompts_sent"}, r"^the collector returned 4 rollouts for 4 rows"),
}
"""Quick scenarios the nemo_gym target fails by NeMo Gym's own code: the invariants that fail, and
what the collection did (the run's ``outcome``)."""


def _collections() -> set[int]:
    """Pids of running NeMo Gym collections started by the ``nemo_gym`` target in this worker."""
    return started_here(lambda process: str(PROGRAM) in (process.info["cmdline"] or []))


def _baseline(tmp_path: Path, *stack_args: str) -> dict[str, Any]:
    """The baseline's JSON document from a child session with the ``nemo_gym`` target."""
    document = tmp_path / "results.json"
    verdicts = run_catalog(
        tmp_path,
        target="nemo_gym",
        scenarios=["baseline"],
        stack_args=[*stack_args, f"--rollout-chaos-json={document}"],
        timeout_s=300,
    )
    assert set(verdicts) == {"baseline"}, verdicts
    loaded: dict[str, Any] = json.loads(document.read_text(encoding="utf-8"))
    return loaded


def _judge_baseline(document: dict[str, Any]) -> None:
    assert document["run"]["settings"]["target"] == "nemo_gym"
    assert document["run"]["gym_client"].startswith("NeMo Gym's own: nemo_gym.rollout_collection")
    [scenario] = document["scenarios"]
    result = scenario["result"]
    assert result["row_outcomes"] == {"completed": result["rows"]}, result["row_outcomes"]
    assert result["expectation_failures"] == []
    assert result["vacuous"] == []
    statuses = {verdict["name"]: verdict["status"] for verdict in result["verdicts"]}
    others = {name: status for name, status in statuses.items() if name != NEMO_GYMS_OWN}
    assert set(others.values()) <= {"PASS", "NOT_JUDGED"}, others
    drift = next(verdict for verdict in result["verdicts"] if verdict["name"] == NEMO_GYMS_OWN)
    assert drift["status"] == "PASS" or DRIFT in drift["summary"], drift
    [settings] = result["trainer_settings"]
    assert settings["trainer"] == "nemo_gym"


def test_baseline_with_nemo_gyms_own_client(gym_python: GymPython, tmp_path: Path) -> None:
    before = _collections()
    document = _baseline(
        tmp_path, "--rollout-chaos-gym=nemo-gym", f"--rollout-chaos-gym-python={gym_python.path}"
    )
    _judge_baseline(document)
    assert any(f"nemo_gym {gym_python.nemo_gym_version}" in line for line in document["run"]["environment"])
    assert _collections() - before == set(), "a NeMo Gym collection outlived its pytest run"


def test_on_the_embedded_servers_only_a_gym_that_posts_to_agents(
    gym_python: GymPython, tmp_path: Path
) -> None:
    """0.4 posts ``/run`` to each agent: it runs on the embedded servers too. From 0.5 on the
    collection goes through environment servers, which only the nemo-gym backend starts: the run
    stops at start with a usage error saying so."""
    settings = ChaosSettings(target="nemo_gym", gym_python=gym_python.path)
    problem = preflight.gym_problem(settings)
    if gym_python.environment_relay:
        assert problem is not None
        assert "add --rollout-chaos-gym=nemo-gym" in problem
        return
    assert problem is None
    _judge_baseline(_baseline(tmp_path, f"--rollout-chaos-gym-python={gym_python.path}"))


def test_the_failures_argued_as_nemo_gyms_own_stay_so(gym_python: GymPython, tmp_path: Path) -> None:
    document = tmp_path / "results.json"
    run_catalog(
        tmp_path,
        target="nemo_gym",
        scenarios=sorted(ARGUED),
        stack_args=[
            "--rollout-chaos-gym=nemo-gym",
            f"--rollout-chaos-gym-python={gym_python.path}",
            f"--rollout-chaos-json={document}",
        ],
        timeout_s=300,
    )
    scenarios = {
        scenario["name"]: scenario
        for scenario in json.loads(document.read_text(encoding="utf-8"))["scenarios"]
    }
    assert set(scenarios) == set(ARGUED)
    for name, (invariants, outcome) in ARGUED.items():
        scenario = scenarios[name]
        assert scenario["outcome"] == "failed", (name, scenario["headline"])
        result = scenario["result"]
        failed = {v["name"] for v in result["verdicts"] if v["status"] not in ("PASS", "NOT_JUDGED")}
        assert failed == invariants, (name, gym_python.nemo_gym_version, failed)
        assert re.search(outcome, result["outcome"]), (name, result["outcome"])
