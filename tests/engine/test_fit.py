"""The fit step: why a scenario cannot run on a stack with a collector, from the stack and from what
the collector declares (its styles, modes, the pairs it cannot combine, its largest group, its reach:
one policy replica counts as the policy); and which invariants do not apply to the collector."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

import pytest

from pytest_rollout_chaos import targets
from pytest_rollout_chaos.collector.abilities import declared
from pytest_rollout_chaos.collector.adapters.nemo_gym import NemoGymCollector
from pytest_rollout_chaos.collector.adapters.nemo_rl import NemoRLCollector
from pytest_rollout_chaos.collector.adapters.skyrl import SkipFailedRolloutsCollector, SkyRLCollector
from pytest_rollout_chaos.collector.adapters.slime import SlimeCollector
from pytest_rollout_chaos.collector.adapters.verl import VerlCollector
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.engine.fit import collector_unfit, inapplicable, unreachable, why_not
from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.scenario.model import FaultStep, Scenario, load_scenario
from tests._unstarted_stack import unstarted_stack
from tests.catalog._verdicts import CATALOG


class _Reaches:
    reaches: ClassVar = {"policy": ("/v1/completions",), "calculator_agent": None}


REACH = declared(_Reaches)


def test_a_replica_of_a_reached_policy_is_reached_on_the_routes_it_declares() -> None:
    hits = FaultStep("http_error", "policy[1]", params={"route": "/v1/completions"})
    assert unreachable(hits, REACH) is None
    misses = FaultStep("http_error", "policy[0]", params={"route": "/tokenize"})
    assert unreachable(misses, REACH) == (
        "it acts on 'policy[0]' route /tokenize, which the collector never requests there"
    )


def test_a_target_the_collector_never_calls_stays_unreached() -> None:
    assert unreachable(FaultStep("kill", "gym_model"), REACH) == "it acts on 'gym_model'"


class _Declares:
    """A collector class declaring every ability the fit step reads."""

    styles = ("gym", "native")
    modes = ("train", "validation")
    cannot_combine: ClassVar = {("native", "train"): "no native train path here"}
    max_group_size = 2
    max_group_size_why = "its trainer tells no larger group's copies apart"


def _scenario(
    tmp_path: Path,
    *,
    style: str = "gym",
    mode: str = "train",
    generations: int = 1,
    row_ids: str = "positions",
    collections: int = 1,
) -> Scenario:
    path = tmp_path / "fit.chaos.yaml"
    path.write_text(
        "name: fit\ndescription: what the collector can run\n"
        f"workload:\n  style: {style}\n  mode: {mode}\n  generations_per_prompt: {generations}\n"
        f"  row_ids: {row_ids}\n  collections: {collections}\n"
        "expect:\n  invariants: [accounted]\n  witness: {rows_answered: 1}\n"
    )
    return load_scenario(path)


def test_one_step_says_why_a_scenario_cannot_run_here_from_the_stack_and_the_collector(
    tmp_path: Path,
) -> None:
    stack = unstarted_stack(tmp_path)
    assert why_not(_scenario(tmp_path), stack, _Declares, run_replicas=1) is None
    assert why_not(_scenario(tmp_path, style="native"), stack, _Declares, run_replicas=1) == (
        "no native train path here"
    )
    assert why_not(_scenario(tmp_path, generations=4), stack, _Declares, run_replicas=1) == (
        "groups of 4 generations per prompt; the collector takes at most 2: its trainer tells no "
        "larger group's copies apart"
    )
    assert why_not(_scenario(tmp_path), stack, _Declares, run_replicas=2) == (
        "the scenario needs 2 policy replica(s) (--rollout-chaos-policy-replicas); this run started 1 "
        "(--rollout-chaos-policy-replicas=2 starts them)"
    )


def test_a_collector_declaring_only_some_modes_is_turned_away_from_the_others(tmp_path: Path) -> None:
    class TrainOnly:
        modes = ("train",)

    assert collector_unfit(_scenario(tmp_path, mode="validation"), declared(TrainOnly)) == (
        "validation-mode scenario; the collector under test supports only train mode (its modes = ('train',))"
    )
    assert collector_unfit(_scenario(tmp_path, mode="validation"), declared(object())) is None


def test_a_declaration_of_the_wrong_shape_says_what_is_valid() -> None:
    class Wrong:
        cannot_combine: ClassVar = {("native", "training"): "typo in the mode"}

    with pytest.raises(
        CollectorTargetError, match=r"Wrong.cannot_combine is .*valid: a mapping of \(style, mode\)"
    ):
        declared(Wrong)


def test_a_collector_that_numbers_rows_itself_is_not_judged_on_ids_that_never_reach_the_servers(
    tmp_path: Path,
) -> None:
    class Renumbers:
        numbers_rows = "its trainer stamps row['_rowidx'] = position"

    assert collector_unfit(_scenario(tmp_path), declared(Renumbers)) is None
    assert collector_unfit(_scenario(tmp_path, row_ids="sparse"), declared(Renumbers)) == (
        "rows numbered sparse (workload.row_ids); the collector numbers every row by its position "
        "itself, so these ids never reach the servers: its trainer stamps row['_rowidx'] = position"
    )
    assert collector_unfit(_scenario(tmp_path, row_ids="offset"), declared(_Declares)) is None

    class Wrong:
        numbers_rows = True

    with pytest.raises(CollectorTargetError, match=r"Wrong.numbers_rows is True; valid: a non-empty string"):
        collector_unfit(_scenario(tmp_path, row_ids="offset"), declared(Wrong))


def test_a_collector_that_runs_one_collection_is_turned_away_from_next_steps(tmp_path: Path) -> None:
    class OneStep:
        max_collections = 1
        max_collections_why = "its actor ends with each collection"

    assert collector_unfit(_scenario(tmp_path), declared(OneStep)) is None
    assert collector_unfit(_scenario(tmp_path, collections=2), declared(OneStep)) == (
        "2 collections in a row (workload.collections); the collector runs at most 1: its actor ends "
        "with each collection"
    )
    assert collector_unfit(_scenario(tmp_path, collections=4), declared(_Declares)) is None


def test_concurrency_bounded_does_not_apply_to_a_collector_keeping_its_own_concurrency() -> None:
    class OwnLimit:
        own_concurrency = "its trainer's rollout semaphore"

    class Honours:
        honours_max_concurrency = True

    assert inapplicable(declared(OwnLimit)) == {
        "concurrency_bounded": (
            "not applicable: the collector under test keeps its own concurrency, not "
            "settings.max_concurrency (workload.max_concurrency): its trainer's rollout semaphore (its "
            "own_concurrency)"
        )
    }
    assert inapplicable(declared(Honours)) == {}
    # declaring nothing is no excuse: the invariant stays, and a scenario listing it is vacuous
    assert inapplicable(declared(object())) == {}
    assert inapplicable(declared(ReferenceCollector)) == {}


def test_a_concurrency_declaration_of_the_wrong_shape_says_what_is_valid() -> None:
    class Empty:
        own_concurrency = ""

    class Both:
        honours_max_concurrency = True
        own_concurrency = "its trainer's"

    with pytest.raises(CollectorTargetError, match=r"Empty.own_concurrency is ''; valid: a non-empty string"):
        inapplicable(declared(Empty))
    with pytest.raises(CollectorTargetError, match=r"Both declares both honours_max_concurrency"):
        inapplicable(declared(Both))


def test_every_adapter_keeps_its_trainers_own_concurrency_and_says_what_it_is() -> None:
    """So ``workload-queued-behind-concurrency``, which lists ``concurrency_bounded``, judges an
    adapter by the rest instead of failing it as vacuous."""
    collectors = {
        "nemo_rl": NemoRLCollector,
        "slime": SlimeCollector,
        "verl": VerlCollector,
        "skyrl": SkyRLCollector,
        "skyrl_skip_failed_rollouts": SkipFailedRolloutsCollector,
        "nemo_gym": NemoGymCollector,
    }
    assert set(collectors) == set(targets.ADAPTERS)
    for name, collector in collectors.items():
        assert list(inapplicable(declared(collector))) == ["concurrency_bounded"], name


class _OwnGenerations:
    """A collector whose own loop generates: it calls the policy, never the Gym model server."""

    reaches: ClassVar = {"policy": None, "collector->policy": None}


class _OwnStop(_OwnGenerations):
    """The same, setting the scenario's stop strings in its own sampling parameters."""

    sets_stop: ClassVar = "its sampling_params.stop"


def test_stop_strings_run_where_the_model_server_generates_and_skip_elsewhere_saying_why(
    tmp_path: Path,
) -> None:
    """``stack.policy.stop`` is set in our model server: native style and a collector whose own loop
    generates without it cannot have it (the catalog's ``turn-ends-at-tool-call``); a collector that
    sets them in its own generations (``sets_stop``: SkyRL's ``sampling_params.stop``) can, in
    either style."""
    scenario = load_scenario(CATALOG / "turn-ends-at-tool-call.chaos.yaml")
    assert scenario.stack.policy.stop == ("</tool_call>",)
    stack = unstarted_stack(tmp_path)
    assert why_not(scenario, stack, ReferenceCollector, run_replicas=1) is None
    assert collector_unfit(scenario, declared(NemoGymCollector)) is None
    own = collector_unfit(scenario, declared(_OwnGenerations))
    assert own is not None
    assert own.startswith("stack.policy.stop=['</tool_call>'] cannot reach the collector under test")
    assert collector_unfit(scenario, declared(_OwnStop)) is None
    assert collector_unfit(scenario, declared(SkyRLCollector)) is None
    native = dataclasses.replace(scenario, workload=dataclasses.replace(scenario.workload, style="native"))
    assert why_not(native, stack, ReferenceCollector, run_replicas=1) == (
        "stack.policy.stop=['</tool_call>'] is set in the Gym model server, and native style generates "
        "from the policy without it"
    )
    assert why_not(native, stack, _OwnStop, run_replicas=1) is None


def test_a_sets_stop_declaration_of_the_wrong_shape_says_what_is_valid() -> None:
    class Wrong(_OwnGenerations):
        sets_stop: ClassVar = True

    with pytest.raises(CollectorTargetError, match="a non-empty string saying where it sets"):
        declared(Wrong)
