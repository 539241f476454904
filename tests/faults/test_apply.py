"""apply: inject/heal recorded once, heal on every path, heal errors never hide the first error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.apply import describe
from pytest_rollout_chaos.faults.base import Exposure, Family, FaultContext, Need, Targets, Touched
from pytest_rollout_chaos.history import History
from tests.faults._applied import applied


@dataclass(frozen=True, slots=True)
class Switch:
    """A tiny real fault: it flips entries of a dict, so its effect can be observed directly."""

    kind: ClassVar[str] = "switch"
    family: ClassVar[Family] = "semantic"
    targets: ClassVar[Targets] = "servers"
    needs: ClassVar[tuple[Need, ...]] = ()

    target: str
    state: dict[str, bool] = field(default_factory=dict, compare=False)
    fail_inject: bool = False
    fail_heal: bool = False

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        self.state[self.target] = True
        if self.fail_inject:
            raise FaultError("inject broke half-way")
        return {"flipped": True}

    async def heal(self, ctx: FaultContext) -> None:
        self.state[self.target] = False
        if self.fail_heal:
            raise FaultError("heal broke")

    def touched(self, exposure: Exposure) -> Touched:
        return Touched(int(self.state.get(self.target, False)), "entries flipped")


@pytest.mark.asyncio
async def test_heal_runs_when_the_block_raises() -> None:
    ctx = FaultContext(history=History())
    fault = Switch(target="a")
    seen_inside: list[bool] = []

    async def body() -> None:
        async with applied(fault, ctx):
            seen_inside.append(fault.state["a"])
            raise KeyError("the test body failed")

    with pytest.raises(KeyError):
        await body()
    assert seen_inside == [True]
    assert fault.state["a"] is False
    assert [event.op for event in ctx.history.events(source="fault")] == ["inject", "heal"]


@pytest.mark.asyncio
async def test_heal_runs_when_inject_fails_half_way_and_the_error_is_recorded() -> None:
    ctx = FaultContext(history=History())
    fault = Switch(target="a", fail_inject=True)
    with pytest.raises(FaultError, match="inject broke"):
        async with applied(fault, ctx):
            pytest.fail("the block must not run")
    assert fault.state["a"] is False
    inject, heal = ctx.history.events(source="fault")
    assert inject.data["error"] == "FaultError: inject broke half-way"
    assert heal.op == "heal"


@pytest.mark.asyncio
async def test_a_failing_heal_does_not_hide_the_blocks_error() -> None:
    ctx = FaultContext(history=History())
    with pytest.raises(KeyError):
        async with applied(Switch(target="a", fail_heal=True), ctx):
            raise KeyError("first")
    assert "heal broke" in ctx.history.events(op="heal")[0].data["error"]


@pytest.mark.asyncio
async def test_a_failing_heal_raises_after_a_clean_block() -> None:
    ctx = FaultContext(history=History())
    with pytest.raises(FaultError, match="heal broke"):
        async with applied(Switch(target="a", fail_heal=True), ctx):
            pass


def test_describe_and_context_errors_list_what_is_known() -> None:
    assert describe(Switch(target="a")) == "switch(state={}, fail_inject=False, fail_heal=False) on a"
    ctx = FaultContext(history=History(), links={"model": "proxy-model"})
    with pytest.raises(FaultError, match=r"no such server \(known servers: none\)"):
        ctx.process("agent")
    with pytest.raises(FaultError, match="network faults need Toxiproxy"):
        ctx.proxy("model")
    with pytest.raises(FaultError, match="act through the HTTP fault layer"):
        ctx.layer_url()
