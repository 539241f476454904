"""The ``nemo_gym`` target's side of the process boundary, with a stand-in for NeMo Gym's program.

The stand-in reads the request as ``servers/nemo_gym/rollouts.py`` does and answers with the
lines a test gives it, so what is checked here is the target's own part: the rows handed over
unchanged, each result mapped as every collector here maps a ``/run`` result, a row not handed
back left missing, a raise carried over as it was raised, the History's ``collect`` events, and
the child stopped at the deadline and on cancel. Real NeMo Gym runs it in ``tests/nemo_gym``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos.collector.abilities import declared
from pytest_rollout_chaos.collector.adapters import nemo_gym
from pytest_rollout_chaos.collector.protocol import (
    CollectionError,
    CollectorContext,
    CollectorSettings,
    Rollout,
    Turn,
)
from pytest_rollout_chaos.engine import fit
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.scenario.model import load_scenario
from pytest_rollout_chaos.servers.nemo_gym.locate import GymPython

CATALOG = Path(__file__).resolve().parents[3] / "scenarios"
HEAD = "http://127.0.0.1:1234"
STAND_IN = """\
import json, os, sys, time
request = json.load(sys.stdin)
folder = os.environ["STAND_IN_FOLDER"]
with open(os.path.join(folder, "request.json"), "w") as file:
    json.dump(request, file)
with open(os.path.join(folder, "pid"), "w") as file:
    file.write(str(os.getpid()))
for line in json.loads(os.environ["STAND_IN_LINES"]):
    print(json.dumps(line), flush=True)
sys.stderr.write("the stand-in's last words\\n")
if os.environ.get("STAND_IN_HANG"):
    time.sleep(600)
"""
ROWS = [
    {"responses_create_params": {"input": [{"role": "user", "content": f"q{n}"}]}, "agent_ref": {"name": "a"}}
    | {"_rowidx": 7 + 3 * n, "task": "echo"}
    for n in range(3)
]


def result(reward: float, *, turns: int = 1, truncated: bool = False) -> dict[str, Any]:
    call = {"prompt_token_ids": [1, 2], "generation_token_ids": [3], "generation_log_probs": [-0.5]}
    calls = [{"type": "message", **call} for _ in range(turns)]
    response: dict[str, Any] = {"output": [{"type": "function_call_output", "output": "{}"}, *calls]}
    if truncated:
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    return {"response": response, "reward": reward, "extra": "kept by NeMo Gym, ignored here"}


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> type[nemo_gym.NemoGymCollector]:
    program = tmp_path / "rollouts.py"
    program.write_text(STAND_IN)
    monkeypatch.setenv("STAND_IN_FOLDER", str(tmp_path))
    monkeypatch.setenv("STAND_IN_LINES", "[]")

    class StandIn(nemo_gym.NemoGymCollector):
        pass

    StandIn.program = program
    return StandIn


def collector(cls: type[nemo_gym.NemoGymCollector], **settings: Any) -> nemo_gym.NemoGymCollector:
    ctx = CollectorContext(
        gym=None,  # type: ignore[arg-type]  # NeMo Gym's own client runs instead of the harness's
        policy="http://127.0.0.1:1/v1",
        env=None,
        tokenizer=None,
        settings=CollectorSettings(**settings),
        history=History(),
        head_url=HEAD,
    )
    return cls(ctx, python=GymPython(Path(sys.executable), "0.4.0", "3.11"))


def answer(monkeypatch: pytest.MonkeyPatch, *lines: dict[str, Any]) -> None:
    monkeypatch.setenv("STAND_IN_LINES", json.dumps(lines))


def ops(made: nemo_gym.NemoGymCollector) -> list[tuple[str, str]]:
    return [(event.kind, event.op) for event in made.ctx.history.events(source="collector")]


def gone(tmp_path: Path) -> bool:
    pid = int((tmp_path / "pid").read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_result_maps_as_every_collector_maps_a_run_result() -> None:
    assert nemo_gym.rollout_of(5, result(1.0, turns=2)) == Rollout(
        5, "completed", 1.0, [Turn([1, 2], [3], [-0.5]), Turn([1, 2], [3], [-0.5])]
    )
    assert nemo_gym.rollout_of(6, result(0.0, truncated=True)).status == "truncated"
    # no output item carries token ids: what NeMo Gym handed back, with no Turns
    bare = {"response": {"output": [{"type": "message", "content": []}]}, "reward": 0.25}
    assert nemo_gym.rollout_of(7, bare) == Rollout(7, "completed", 0.25, [])
    # an item with its generation but no prompt ids (NeMo Gym hands it back unchecked): no Turns,
    # and no raise here, which would end a collection NeMo Gym went on with
    unreadable = result(0.5, turns=2)
    del unreadable["response"]["output"][2]["prompt_token_ids"]
    assert nemo_gym.rollout_of(8, unreadable) == Rollout(8, "completed", 0.5, [])


def test_rows_go_in_as_given_and_what_comes_back_is_what_is_returned(
    stand_in: type[nemo_gym.NemoGymCollector], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer(
        monkeypatch,
        {"row": 2, "result": result(1.0, turns=2)},
        {"row": 0, "result": result(0.0)},
        {"done": 2},
    )
    made = collector(stand_in)
    rollouts = asyncio.run(made.collect(ROWS, mode="train"))
    request = json.loads((tmp_path / "request.json").read_text())
    assert request == {"head": {"host": "127.0.0.1", "port": 1234}, "rows": ROWS, nemo_gym.PARALLEL: None}
    # in the order handed over; row 10, which NeMo Gym did not hand back, stays missing
    assert [(r.row_index, r.reward, len(r.turns)) for r in rollouts] == [(7, 0.0, 1), (13, 1.0, 2)]
    assert ops(made) == [
        ("info", "trainer_settings"),
        ("invoke", "collect"),
        ("info", "rollout"),
        ("info", "rollout"),
        ("ok", "collect"),
    ]
    assert gone(tmp_path)


def test_what_nemo_gym_raised_is_raised_as_it_was(
    stand_in: type[nemo_gym.NemoGymCollector], monkeypatch: pytest.MonkeyPatch
) -> None:
    raised = {
        "type": "ClientResponseError",
        "message": "500, message='Internal Server Error', url='http://127.0.0.1:9/run'",
        "where": "nemo_gym/server_utils.py:512 in raise_for_status",
        "causes": ["ValueError: the agent's own words"],
    }
    answer(monkeypatch, {"row": 1, "result": result(1.0)}, {"raised": raised})
    made = collector(stand_in)
    with pytest.raises(nemo_gym.NemoGymRaisedError) as caught:
        asyncio.run(made.collect(ROWS, mode="validation"))
    assert str(caught.value) == (
        "NeMo Gym's rollout collection raised ClientResponseError: 500, message='Internal Server Error', "
        "url='http://127.0.0.1:9/run' (at nemo_gym/server_utils.py:512 in raise_for_status); caused by "
        "ValueError: the agent's own words; 1 of 3 rows had come back"
    )
    assert ops(made)[-1] == ("fail", "collect")


def test_a_child_that_ends_without_an_answer_is_a_collection_error_with_its_stderr(
    stand_in: type[nemo_gym.NemoGymCollector],
) -> None:
    ended = r"(?s)exited with code 0 before it ended.*the stand-in's last words"
    with pytest.raises(CollectionError, match=ended):
        asyncio.run(collector(stand_in).collect(ROWS, mode="train"))


def test_the_child_is_killed_at_collect_timeout_s(
    stand_in: type[nemo_gym.NemoGymCollector], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_HANG", "1")
    answer(monkeypatch, {"row": 0, "result": result(1.0)})
    late = r"did not finish within collect_timeout_s=0\.5 \(1 had come back\)"
    with pytest.raises(CollectionError, match=late):
        asyncio.run(collector(stand_in, collect_timeout_s=0.5).collect(ROWS, mode="train"))
    assert gone(tmp_path)


def test_a_cancelled_collection_kills_the_child(
    stand_in: type[nemo_gym.NemoGymCollector], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_HANG", "1")

    async def cancel_once_started() -> None:
        task = asyncio.create_task(collector(stand_in).collect(ROWS, mode="train"))
        while not (tmp_path / "pid").exists():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_once_started())
    assert gone(tmp_path)


@pytest.mark.parametrize(
    ("scenario", "reason"),
    [
        ("baseline", None),
        ("short-results", "faults/0 short_results cannot reach the collector under test: it acts on 'gym_"),
        ("native-token-limit-truncated", "native-style scenario; the collector under test supports only gym"),
    ],
)
def test_what_it_cannot_run_is_skipped_before_anything_starts(scenario: str, reason: str | None) -> None:
    unfit = fit.collector_unfit(load_scenario(CATALOG / f"{scenario}.chaos.yaml"), declared(nemo_gym.factory))
    assert unfit == reason if reason is None else unfit is not None and unfit.startswith(reason)
