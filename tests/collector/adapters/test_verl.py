"""The ``verl`` adapter drives the recipe's real manager, and maps what verl trains on faithfully.

In-process tests run the recipe's ``_async_generate_sequences`` over the hand-written Gym
runner (``tests/collector/_fake_gym.py``, which records ``/run`` answers as the fault layer
does, so the invariants can judge), on PR #80's tree and on verl-recipe main's. The slow tests run
catalog scenarios on the real stack in child sessions. Both show the fidelity guard: the
recipe's 1-token dummy, substituted for a row it cannot read, stays a completed rollout that
``turns_generated`` fails, and an adapter that hides it (``_verl_variants.HidesPlaceholder``)
turns the same verdict green.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_rollout_chaos import bundled, tokens
from pytest_rollout_chaos.collector.adapters import (
    upstream_calls,
    verl,
    verl_prompts,
    verl_status,
    verl_train_batch,
)
from pytest_rollout_chaos.collector.protocol import CollectorContext, Rollout
from pytest_rollout_chaos.invariants.base import Observation
from pytest_rollout_chaos.invariants.compose import check_all
from tests.catalog._verdicts import ScenarioVerdicts, run_catalog
from tests.collector._fake_gym import FakeGym, context, result_for, rows
from tests.collector.adapters._train_batch import NOT_READ
from tests.collector.adapters._verl_trees import verl_recipe, verl_recipe_main_tree, verl_recipe_tree
from tests.collector.adapters._verl_variants import (
    GenerationOnly,
    HidesPlaceholder,
    OnTransformers4,
    looks_like_placeholder,
)

__all__ = ["verl_recipe", "verl_recipe_main_tree", "verl_recipe_tree"]  # the fixtures, imported to be found

Result = tuple[dict[str, Any], dict[str, Any]]

JUDGED = ("accounted", "corroborated", "turns_generated", "prefix_consistent", "finite_logprobs")
EOS = 3  # the tiny model's <|im_end|>


class StartedGym(FakeGym):
    """``FakeGym`` whose ``/run`` requests all start at once, as NeMo Gym's and ``ctx.gym``'s do, so a
    row the recipe stops awaiting (it raised on an earlier one) still finishes."""

    def run_examples(self, rows: Sequence[Mapping[str, Any]]) -> Iterator[Awaitable[Result]]:
        return iter([asyncio.ensure_future(run) for run in super().run_examples(rows)])


def verl_context(gym: FakeGym) -> CollectorContext:
    return dataclasses.replace(context(gym), model_dir=bundled.tiny_model_dir())


def judged(ctx: CollectorContext, requested: list[dict[str, Any]], rollouts: list[Rollout]) -> dict[str, str]:
    observation = Observation(requested, rollouts, None, ctx.history, deadline_s=30.0, elapsed_s=1.0)
    return {verdict.name: verdict.status.value for verdict in check_all(observation, JUDGED)}


def test_mask_runs_are_the_generations_inside_a_response() -> None:
    assert verl.mask_runs([]) == []
    assert verl.mask_runs([0, 0]) == []
    assert verl.mask_runs([1, 1, 0, 0, 1, 0, 1]) == [(0, 2), (4, 5), (6, 7)]


@pytest.mark.asyncio
async def test_each_row_comes_back_as_the_turns_verl_trains_on(verl_recipe: ModuleType) -> None:
    gym = StartedGym()
    ctx = verl_context(gym)
    requested = rows(3)
    rollouts = await verl.factory(ctx).collect(requested, mode="train")
    assert [rollout.row_index for rollout in rollouts] == [0, 1, 2]
    for rollout in rollouts:
        expected = result_for(rollout.row_index, "ok")["response"]["output"]
        generated = [item for item in expected if "generation_token_ids" in item]
        assert rollout.status == "completed"
        assert rollout.reward == 1.0
        assert [turn.prompt_token_ids for turn in rollout.turns] == [i["prompt_token_ids"] for i in generated]
        assert [turn.generation_token_ids for turn in rollout.turns] == [
            i["generation_token_ids"] for i in generated
        ]
        for turn, item in zip(rollout.turns, generated, strict=True):  # float32 in the DataProto
            assert turn.generation_log_probs == pytest.approx(item["generation_log_probs"], abs=1e-6)
    assert set(judged(ctx, requested, rollouts).values()) == {"PASS"}
    calls = [
        event.kind for event in ctx.history.events(source="collector") if event.op == "generate_sequences"
    ]
    assert calls == ["invoke", "ok"]


class SeenGym(StartedGym):
    """``StartedGym`` that keeps every row the recipe sent it, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, Any]] = []

    def run_examples(self, rows: Sequence[Mapping[str, Any]]) -> Iterator[Awaitable[Result]]:
        self.seen += [dict(row) for row in rows]
        return super().run_examples(rows)


@pytest.mark.asyncio
async def test_groups_are_one_prompt_repeated_rollout_n_times_by_verls_own_repeat(
    verl_recipe: ModuleType,
) -> None:
    gym = SeenGym()
    ctx = verl_context(gym)
    requested = [{**row, "_rowidx": 3 * at + member} for at, row in enumerate(rows(2)) for member in range(3)]
    rollouts = await verl.factory(ctx).collect(requested, mode="train")
    assert [rollout.row_index for rollout in rollouts] == list(range(6))
    assert [row["_rowidx"] for row in gym.seen] == list(range(6))
    prompts = [row["responses_create_params"]["input"] for row in gym.seen]
    assert prompts[:3] == [requested[0]["responses_create_params"]["input"]] * 3
    assert prompts[3:] == [requested[3]["responses_create_params"]["input"]] * 3
    [given] = [event.data for event in ctx.history.events(source="collector", op="trainer_settings")]
    assert {item["key"]: item["value"] for item in given["settings"]}["actor_rollout_ref.rollout.n"] == 3


@pytest.mark.asyncio
async def test_train_rows_come_from_the_batch_update_actor_gets_and_stopping_at_generation_is_caught(
    verl_recipe: ModuleType,
) -> None:
    """The real adapter reads its rows from the batch ``fit`` hands ``update_actor`` (each says it is
    in it, and verl's ``fit`` call is recorded with what is stood in); one that stops at the
    manager's output (``_verl_variants.GenerationOnly``) says nothing of a train batch, which
    ``train_batch_sound`` shows."""
    summaries = {}
    for name, collector in (("real", verl.VerlCollector), ("broken", GenerationOnly)):
        ctx = verl_context(StartedGym())
        requested = rows(3)
        rollouts = await collector(ctx).collect(requested, mode="train")
        observation = Observation(requested, rollouts, None, ctx.history, deadline_s=30.0, elapsed_s=1.0)
        [sound] = check_all(observation, ["train_batch_sound"])
        assert sound.status.value == "PASS", sound.summary
        summaries[name] = (sound.summary, {rollout.in_train_batch for rollout in rollouts})
        fit = [event for event in ctx.history.events(source="collector") if event.op == "upstream"]
        if name == "real":
            assert [event.kind for event in fit] == ["invoke", "ok"]
            assert fit[0].data["stood_in"] == [
                verl.GYM_CLIENT,
                *verl_train_batch.STOOD_IN,
                *verl_status.STOOD_IN,
            ]
            ran = upstream_calls.summary(ctx.history)  # what the report's Upstream section shows
            assert ran["read_out"] == verl.READ_OUT
            generation, fit_call = ran["calls"]
            assert generation["call"].endswith("AgentLoopManager._async_generate_sequences")
            assert (
                fit_call["call"]
                == f"{verl_train_batch.TRAINER_MODULE}.RayPPOTrainer.fit, generation to update_actor"
            )
            assert (generation["outcome"], fit_call["outcome"]) == ("ok", "ok")
            assert ran["stood_in"][: len(verl.GENERATION_STOOD_IN)] == list(verl.GENERATION_STOOD_IN)
        else:
            assert fit == []
    assert NOT_READ not in summaries["real"][0], summaries
    assert summaries["real"][1] == {True}, summaries
    assert NOT_READ in summaries["broken"][0], summaries
    assert summaries["broken"][1] == {None}, summaries


@pytest.mark.asyncio
async def test_a_short_count_raises_the_recipes_own_error(verl_recipe: ModuleType) -> None:
    gym = StartedGym()
    gym.short_by = 1
    with pytest.raises(RuntimeError, match=r"nemo-gym did not return results for samples: \[2\]"):
        await verl.factory(verl_context(gym)).collect(rows(3), mode="train")


@pytest.mark.asyncio
async def test_an_http_failure_of_one_row_takes_the_whole_batch_down(verl_recipe: ModuleType) -> None:
    gym = StartedGym({1: ["error"]})
    with pytest.raises(Exception, match="500"):
        await verl.factory(verl_context(gym)).collect(rows(3), mode="train")


@pytest.mark.asyncio
async def test_an_unreadable_result_crashes_the_recipes_fallback_on_transformers_5(
    verl_recipe: ModuleType,
) -> None:
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip(f"transformers {transformers.__version__}: the recipe's fallback works there")
    gym = StartedGym({1: ["bad_drift"]})
    with pytest.raises(TypeError, match="cannot be interpreted as an integer") as raised:
        await verl.factory(verl_context(gym)).collect(rows(3), mode="train")
    assert "Non-contiguous token IDs" in str(raised.value.__context__)


@pytest.mark.asyncio
async def test_the_substituted_dummy_stays_a_completed_rollout_the_model_never_generated(
    verl_recipe: ModuleType,
) -> None:
    gym = StartedGym({1: ["bad_drift"]})
    ctx = verl_context(gym)
    requested = rows(3)
    rollouts = await OnTransformers4(ctx).collect(requested, mode="train")
    dummy = rollouts[1]
    assert dummy.status == "completed"
    assert looks_like_placeholder(dummy)
    assert not any(looks_like_placeholder(rollout) for rollout in (rollouts[0], rollouts[2]))
    verdicts = judged(ctx, requested, rollouts)
    assert verdicts["turns_generated"] == "FAIL"
    assert {name: status for name, status in verdicts.items() if name != "turns_generated"} == dict.fromkeys(
        ("accounted", "corroborated", "prefix_consistent", "finite_logprobs"), "PASS"
    )


@pytest.mark.asyncio
async def test_an_adapter_that_hides_the_dummy_makes_the_same_run_look_green(verl_recipe: ModuleType) -> None:
    gym = StartedGym({1: ["bad_drift"]})
    ctx = verl_context(gym)
    requested = rows(3)
    rollouts = await HidesPlaceholder(ctx).collect(requested, mode="train")
    assert rollouts[1].status == "aborted"
    assert set(judged(ctx, requested, rollouts).values()) == {"PASS"}


@pytest.mark.parametrize(
    ("max_model_len", "status"),
    [
        (None, "completed"),  # verl's default: the recipe knows of no truncation
        (9, "completed"),  # every row's 8 tokens fit
        (8, "truncated"),  # the recipe's hit_max: all of a row's tokens >= max_model_len
    ],
)
@pytest.mark.asyncio
async def test_the_row_status_is_verls_own_per_row_signal(
    verl_recipe: ModuleType, max_model_len: int | None, status: str
) -> None:
    """Each row is 2 prompt tokens and 6 more (``result_for``): truncated exactly where the recipe's
    ``_compute_rollout_metrics`` says ``hit_max`` (``verl_status``)."""
    asked = {} if max_model_len is None else {"verl.actor_rollout_ref.rollout.max_model_len": max_model_len}
    ctx = dataclasses.replace(
        context(StartedGym(), trainer_config=MappingProxyType(asked)), model_dir=bundled.tiny_model_dir()
    )
    rollouts = await verl.factory(ctx).collect(rows(3), mode="train")
    assert [(rollout.status, rollout.error, rollout.in_train_batch) for rollout in rollouts] == [
        (status, None, True)
    ] * 3
    assert verl_recipe._compute_rollout_metrics.__name__ == "_compute_rollout_metrics"  # restored


@pytest.mark.asyncio
async def test_a_model_call_that_generated_nothing_takes_the_batch_down_in_the_recipes_packing(
    verl_recipe: ModuleType,
) -> None:
    """The recipe pads each response with the tokenizer; an empty one comes back a list, not a
    tensor, so one row with no response token fails the whole batch before verl sees it."""
    with pytest.raises(AttributeError, match="'list' object has no attribute 'dim'") as raised:
        await verl.factory(verl_context(StartedGym({1: ["empty"]}))).collect(rows(3), mode="train")
    assert str(raised.traceback[-1].path).endswith("nemo_gym/agent_loop.py")


def test_a_row_with_no_response_token_reads_aborted_as_verls_metrics_count_it(
    verl_recipe: ModuleType,
) -> None:
    torch = pytest.importorskip("torch")
    protocol: Any = importlib.import_module("verl.protocol")
    batch = protocol.DataProto.from_dict(
        {
            "responses": torch.tensor([[5, 6], [0, 0], [7, 0]]),
            "attention_mask": torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]]),
        }
    )
    assert verl_status.statuses(batch, hit_max=[False, False, True]) == [
        ("completed", None),
        ("aborted", verl_status.ABORTED),
        ("truncated", None),
    ]


def test_validation_rows_carry_the_validation_sampling(verl_recipe: ModuleType) -> None:
    ctx = verl_context(StartedGym())
    collector = verl.factory(ctx)
    prompts = verl_prompts.prompts_proto(collector.recipe, rows(2), collector.tokenizer, validate=True)
    config = collector.manager().rollout_config
    built = verl_recipe._build_nemo_gym_examples(prompts, config, validate=True)
    assert [row["_rowidx"] for row in built] == [0, 1]
    # verl's own val_kwargs (rollout.yaml: temperature 0), not the training temperature (1.0)
    assert (config.val_kwargs.temperature, config.temperature) == (0, 1.0)
    assert all(row["responses_create_params"]["temperature"] == 0 for row in built)
    assert prompts.meta_info["validate"] is True


# -- the recipe's server patch splice is the embedded model server's ---------------------------

token_ids = st.lists(st.integers(min_value=0, max_value=5), max_size=12)


class _Eos:
    eos_token_id = EOS


def _splice_outcome(function: Any, *args: Any) -> tuple[str, list[int] | None]:
    try:
        return "ok", list(function(*args))
    except (ValueError, tokens.PrefixSpliceError):
        return "refused", None


@given(model_prefix=token_ids, template_prefix=token_ids, template_ids=token_ids)
def test_the_recipes_splice_and_the_model_servers_agree(
    verl_recipe: ModuleType, model_prefix: list[int], template_prefix: list[int], template_ids: list[int]
) -> None:
    patch = _server_patch()
    assert _splice_outcome(
        patch._replace_prefix_tokens, model_prefix, template_prefix, template_ids, _Eos()
    ) == _splice_outcome(tokens.splice_prefix, model_prefix, template_prefix, template_ids, EOS)


def test_the_recipes_splice_keeps_a_drifted_turn_as_the_model_generated_it(verl_recipe: ModuleType) -> None:
    tokenizer = verl.tokenizer_for(bundled.tiny_model_dir())
    question = [{"role": "user", "content": "what is 12 + 30?"}]
    answer = "the answer is 42"
    prompt = tokenizer.apply_chat_template(question, add_generation_prompt=True, return_dict=False)
    # the model spells the answer character by character: the template would re-tokenize it merged
    generated = [token for char in answer for token in tokenizer.encode(char, add_special_tokens=False)]
    generated.append(EOS)
    conversation = [*question, {"role": "assistant", "content": answer}, {"role": "user", "content": "sure?"}]
    template_ids = tokenizer.apply_chat_template(conversation, add_generation_prompt=True, return_dict=False)
    template_prefix = tokenizer.apply_chat_template(conversation[:2], return_dict=False)
    model_prefix = prompt + generated
    assert template_ids[: len(model_prefix)] != model_prefix  # the drift is real
    spliced = _server_patch()._replace_prefix_tokens(model_prefix, template_prefix, template_ids, tokenizer)
    assert spliced == tokens.splice_prefix(model_prefix, template_prefix, template_ids, EOS)
    assert spliced[: len(model_prefix) - 1] == model_prefix[:-1]


def _server_patch() -> ModuleType:
    """The recipe's ``server_patch`` module (the tree is mounted as ``recipe`` once ``verl_recipe`` ran)."""
    return importlib.import_module("recipe.nemo_gym.server_patch")


# -- on the real stack -------------------------------------------------------------------------

SCENARIOS = ["baseline", "short-results"]
DRIFT = "retokenization-drift"


def verdicts_of(target: str, scenarios: list[str], tree: Path, scratch: Path) -> dict[str, ScenarioVerdicts]:
    scratch.mkdir()
    stack = [f"--rollout-chaos-upstream={tree}"]
    return run_catalog(scratch, target=target, scenarios=scenarios, stack_args=stack)


@pytest.mark.slow
def test_on_the_stack_the_dummy_fails_turns_generated_and_hiding_it_would_pass(
    verl_recipe_tree: Path, tmp_path: Path
) -> None:
    real = verdicts_of("verl", SCENARIOS, verl_recipe_tree, tmp_path / "real")
    assert real["baseline"].passed, real["baseline"].message
    # the recipe raises on a short count: nothing silent, nothing lost
    short = real["short-results"]
    assert short.invariants["accounted"] == "PASS", short.message
    assert short.invariants["no_silent_short_count"] == "PASS", short.message
    variants = "tests.collector.adapters._verl_variants"
    faithful = verdicts_of(f"{variants}:on_transformers_4", [DRIFT], verl_recipe_tree, tmp_path / "t4")
    assert not faithful[DRIFT].passed
    assert faithful[DRIFT].invariants.get("turns_generated") == "FAIL", faithful[DRIFT].message
    hidden = verdicts_of(f"{variants}:hides_placeholder", [DRIFT], verl_recipe_tree, tmp_path / "hidden")
    assert hidden[DRIFT].passed, hidden[DRIFT].message


@pytest.mark.slow
def test_on_verl_recipe_main_the_recipe_collects_as_pr_80_did(
    verl_recipe_main_tree: Path, tmp_path: Path
) -> None:
    """verl-recipe main renamed the manager and added its vLLM replica class; its collection code is
    PR #80's, so the verdicts are PR #80's: baseline green, the short count raised, nothing lost."""
    real = verdicts_of("verl", SCENARIOS, verl_recipe_main_tree, tmp_path / "main")
    assert real["baseline"].passed, real["baseline"].message
    short = real["short-results"]
    assert short.invariants["accounted"] == "PASS", short.message
    assert short.invariants["no_silent_short_count"] == "PASS", short.message
