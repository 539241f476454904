"""The rows as the ``skyrl`` adapter hands them to SkyRL's generator in place of the trainer's
dataloader: a row's tools in its prompt, the token budget of each generation, one prompt per GRPO
group, and each of SkyRL's copies of a prompt seeded from its own row (on every pinned tree)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_rollout_chaos.collector.adapters import skyrl_env, skyrl_prompts, skyrl_upstream
from pytest_rollout_chaos.servers.gym import tasks
from pytest_rollout_chaos.servers.gym.convert import tools_to_chat
from pytest_rollout_chaos.servers.gym.stack import MAX_OUTPUT_TOKENS
from pytest_rollout_chaos.servers.policy.chat import CHAT_TEMPLATE, ChatTemplate
from tests.collector.adapters import _skyrl_trees as trees


def test_rows_become_skyrl_prompts_and_sessions() -> None:
    assert skyrl_prompts.messages_of({"responses_create_params": {"input": "hi there"}}) == [
        {"role": "user", "content": "hi there"}
    ]
    with pytest.raises(ValueError, match=r"row 4 has no responses_create_params.input"):
        skyrl_prompts.messages_of({"_rowidx": 4})
    assert skyrl_prompts.session_id("12", 0) == "12_0"


# -- a row's tools and token limit: what SkyRL's generator is handed in place of the dataloader's ----
class TemplateTokenizer:
    """The part of a Hugging Face tokenizer ``with_tools`` calls: the bundled model's chat template."""

    def __init__(self, template: str = CHAT_TEMPLATE) -> None:
        self.template = ChatTemplate(template)

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        *,
        tokenize: bool,
        add_generation_prompt: bool,
        tools: list[dict[str, Any]] | None = None,
    ) -> str:
        assert not tokenize
        return self.template.render(messages, tools=tools, add_generation_prompt=add_generation_prompt)


@pytest.mark.parametrize("system", [None, "Use the calculator for arithmetic."])
def test_a_rows_tools_become_the_system_message_its_template_writes_for_them(system: str | None) -> None:
    """SkyRL templates the prompt without ``tools=``; the system message makes it the same text."""
    row = tasks.calculator_row(12, "+", 7, row_index=3)
    if system is not None:
        params = row["responses_create_params"]
        params["input"] = [{"role": "system", "content": system}, *params["input"]]
    tokenizer = TemplateTokenizer()
    [prompt] = skyrl_prompts.prompts_of([row], 1, {}, tokenizer)
    messages = prompt["prompt"]
    assert [message["role"] for message in messages] == ["system", "user"]
    tools = tools_to_chat(row["responses_create_params"]["tools"])
    assert tokenizer.template.render(messages) == tokenizer.template.render(
        skyrl_prompts.messages_of(row), tools=tools
    )
    assert '"name": "calculator"' in messages[0]["content"]
    assert (system or "") in messages[0]["content"]
    [echo] = skyrl_prompts.prompts_of([tasks.echo_row("zebra")], 1, {}, tokenizer)
    assert echo["prompt"] == [{"role": "user", "content": "Repeat exactly: zebra"}]


def test_a_template_that_keeps_tools_out_of_a_system_turn_is_an_error() -> None:
    elsewhere = (
        "{%- for message in messages %}{{- message.role + ': ' + message.content + '\\n' }}{%- endfor %}"
        "{%- if tools %}{{- 'tools: ' + tools | tojson }}{%- endif %}"
    )
    with pytest.raises(ValueError, match=r"does not write a row's tools into a system message"):
        skyrl_prompts.prompts_of([tasks.calculator_row(1, "+", 2)], 1, {}, TemplateTokenizer(elsewhere))


def test_the_generation_limit_is_the_rows_else_the_stacks_model_servers() -> None:
    rows = [tasks.calculator_row(1, "+", 2), tasks.echo_row("zebra")]
    assert skyrl_prompts.generation_limit(rows) == MAX_OUTPUT_TOKENS
    for row in rows:
        row["responses_create_params"]["max_output_tokens"] = 24
    assert skyrl_prompts.generation_limit(rows) == 24
    rows[1]["responses_create_params"]["max_output_tokens"] = 8
    with pytest.raises(ValueError, match=r"different max_output_tokens \(\[8, 24\]\)"):
        skyrl_prompts.generation_limit(rows)


# -- GRPO groups: one SkyRL prompt per group, each of SkyRL's copies seeded from its own row ----------
def grouped_rows(size: int = 4, prompts: int = 2) -> list[dict[str, Any]]:
    """``prompts`` prompts, each ``size`` consecutive rows equal but for ``_rowidx``."""
    return [
        {"responses_create_params": {"input": f"question {p}"}, "task": "echo", "_rowidx": p * size + k}
        for p in range(prompts)
        for k in range(size)
    ]


@dataclass(frozen=True)
class Trajectory:
    """The two fields of SkyRL's ``TrajectoryID`` the hook reads."""

    instance_id: str
    repetition_id: int


def test_a_group_is_one_prompt_whose_extras_carry_every_row() -> None:
    prompts = skyrl_prompts.prompts_of(grouped_rows(), 4, {"shared": 1}, None)
    assert [prompt["uid"] for prompt in prompts] == ["0", "4"]
    assert [row["_rowidx"] for row in prompts[1]["env_extras"][skyrl_env.ROWS]] == [4, 5, 6, 7]
    assert prompts[1]["prompt"] == [{"role": "user", "content": "question 1"}]
    assert prompts[1]["env_extras"]["shared"] == 1
    one_each = skyrl_prompts.prompts_of(grouped_rows(), 1, {}, None)
    assert [prompt["uid"] for prompt in one_each] == [str(i) for i in range(8)]


def test_each_sample_gets_the_row_of_its_repetition_and_its_trajectorys_session() -> None:
    [_, second] = skyrl_prompts.prompts_of(grouped_rows(), 4, {}, None)
    own = skyrl_prompts.sample_extras(dict(second["env_extras"]), Trajectory("4", 2))
    assert own[skyrl_env.ROW]["_rowidx"] == 6
    assert own[skyrl_env.SESSION_ID] == "4_2"
    with pytest.raises(ValueError, match=r"repetition_id outside the group of 4 rows"):
        skyrl_prompts.sample_extras(dict(second["env_extras"]), Trajectory("4", 4))
    with pytest.raises(ValueError, match=r"no trajectory_id for a prompt of 4 rows"):
        skyrl_prompts.sample_extras(dict(second["env_extras"]), None)


@pytest.fixture(params=[trees.BASE, trees.HEAD, trees.MAIN])
def skyrl_tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One pinned tree's ``skyrl`` imported (by name), without the stack."""
    with trees.importable(trees.unpack(request.param, tmp_path_factory.mktemp("skyrl"))):
        yield request.param


def test_skyrls_own_repetition_reaches_each_sample_its_own_row(skyrl_tree: str) -> None:
    """SkyRL's ``prepare_generator_input`` copies one prompt's extras per sample; the generator's
    ``_setup_env_extras`` (called by ``agent_loop`` with the sample's ``TrajectoryID``) then holds
    the sample's own row, in row order, and the session id ``agent_loop`` gives the trajectory."""
    utils: Any = importlib.import_module(skyrl_upstream.GENERATOR_UTILS_MODULE)
    base: Any = importlib.import_module(skyrl_upstream.GENERATOR_MODULE).SkyRLGymGenerator
    assert hasattr(base, skyrl_prompts.HOOK), f"{skyrl_tree} has no {skyrl_prompts.HOOK}"
    batch, uids = utils.prepare_generator_input(
        skyrl_prompts.prompts_of(grouped_rows(), 4, {}, None), 4, {}, None, "train", 0
    )
    assert uids == ["0"] * 4 + ["4"] * 4
    generator_class = skyrl_prompts.generator_class(base)
    generator: Any = object.__new__(generator_class)  # the hook reads nothing of the instance
    seen = []
    for extras, trajectory in zip(batch["env_extras"], batch["trajectory_ids"], strict=True):
        own = generator._setup_env_extras(skyrl_env.ENV_ID, extras, None, trajectory)
        assert own[skyrl_env.SESSION_ID] == f"{trajectory.instance_id}_{trajectory.repetition_id}"
        seen.append(own[skyrl_env.ROW]["_rowidx"])
    assert seen == list(range(8))
