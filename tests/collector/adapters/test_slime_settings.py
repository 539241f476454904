"""The ``slime`` adapter gives slime its own argument defaults, read against the pinned trees' source.

Every argument the adapter hands slime is either slime's parser default (as ``add_argument`` or a
``getattr(args, ..., default)`` in the tree has it) or an argument slime reads that the run fixes
(the checkpoint, the generate hook, the group size, one engine); only ``workload.trainer_config``
changes one. Nothing of slime is imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos.collector.adapters import slime_settings
from pytest_rollout_chaos.errors import CollectorTargetError
from tests.collector.adapters._settings_context import settings_context
from tests.collector.adapters._slime_trees import BASE, HEAD, unpack
from tests.collector.adapters._upstream_defaults import attributes_read, code_defaults


@pytest.fixture(scope="module", params=[BASE, HEAD])
def tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(request.param, tmp_path_factory.mktemp("slime"))


def test_no_argument_differs_from_slimes_default_unless_the_scenario_asked(tree: Path) -> None:
    defaults = code_defaults(tree, "slime")
    read = attributes_read(tree, "slime", "args")
    wrong = []
    for item in slime_settings.settings(settings_context(), n_samples_per_prompt=4).items:
        if item.key not in read:
            wrong.append(f"{item.key}: slime never reads args.{item.key}")
        if item.source == "upstream default" and item.value not in defaults.get(item.key, []):
            wrong.append(f"{item.key} = {item.value!r}: slime's defaults are {defaults.get(item.key)}")
        elif item.source not in ("upstream default", "run"):
            wrong.append(f"{item.key} from {item.source} though the scenario asked nothing")
    assert wrong == []


def test_the_seed_and_the_concurrency_are_slimes() -> None:
    taken = {
        item.key: item for item in slime_settings.settings(settings_context(), n_samples_per_prompt=1).items
    }
    assert taken["rollout_seed"].value == 42
    assert taken["sglang_server_concurrency"].value == 512
    assert taken["n_samples_per_prompt"].source == "run"


def test_a_scenario_sets_a_slime_argument_and_the_others_ignore_it() -> None:
    ctx = settings_context(
        **{"slime.rollout_seed": 7, "nemo_rl.policy.generation.vllm_cfg.async_engine": True}
    )
    taken = {item.key: item for item in slime_settings.settings(ctx, n_samples_per_prompt=1).items}
    assert (taken["rollout_seed"].value, taken["rollout_seed"].source) == (7, "scenario")
    assert [key for key, item in taken.items() if item.source == "scenario"] == ["rollout_seed"]


def test_an_argument_the_adapter_does_not_hand_slime_is_an_error() -> None:
    with pytest.raises(
        CollectorTargetError, match=r"no setting slime\.rollout_sed \(valid: slime\.hf_checkpoint"
    ):
        slime_settings.settings(settings_context(**{"slime.rollout_sed": 7}), n_samples_per_prompt=1)
