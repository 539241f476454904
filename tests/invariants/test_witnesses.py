"""Witnesses count what happened from the servers' record, never from the collector's claims."""

from __future__ import annotations

from pytest_rollout_chaos.history import EventKind, History, fingerprint
from pytest_rollout_chaos.invariants import witnesses

RUN_LINK = "collector->agent:calculator_agent"


def _run(
    history: History, row: int, calls: int, *, drifted: list[int] | None = None, status: int = 200
) -> None:
    facts = {"link": RUN_LINK, "server": "calculator_agent", "row": row}
    history.append("agent", "invoke", "POST /run", facts, request_id=f"run-{row}-{len(history.events())}")
    if status >= 400:
        history.append("agent", "fail", "POST /run", {**facts, "status": status})
        return
    data = {
        **facts,
        "status": status,
        "generations": [fingerprint([row, n]) for n in range(calls)],
        "reward": 1.0,
    }
    if drifted:
        data["drifted"] = drifted
    history.append("agent", "ok", "POST /run", data)


def _policy(history: History, request: int, *, status: int | None, link: str = "model->policy") -> None:
    facts = {"link": link, "server": "policy"}
    history.append("policy", "invoke", "POST /v1/chat/completions", facts, request_id=f"p{request}")
    if status is None:
        history.append(
            "policy",
            "info",
            "POST /v1/chat/completions",
            {**facts, "error": "refused"},
            request_id=f"p{request}",
        )
    else:
        kind: EventKind = "ok" if status < 400 else "fail"
        history.append(
            "policy", kind, "POST /v1/chat/completions", {**facts, "status": status}, request_id=f"p{request}"
        )


def test_prompt_ids_drifted_counts_rows_whose_answered_run_drifted() -> None:
    history = History()
    _run(history, 0, 2)
    _run(history, 1, 2, drifted=[1])
    _run(history, 2, 3, drifted=[1, 2])
    _run(history, 3, 2, status=500)
    [sighting] = witnesses.look(history, {"prompt_ids_drifted": 2})
    assert sighting.seen
    assert sighting.describe() == (
        "prompt_ids_drifted: seen 2 (at least 2): rows whose prompt ids drifted between turns (rows [1, 2])"
    )


def test_a_witness_not_seen_says_what_was_counted_where_and_how_many_were_needed() -> None:
    history = History()
    _run(history, 0, 2)
    [sighting] = witnesses.look(history, {"prompt_ids_drifted": 1})
    assert not sighting.seen
    assert sighting.describe() == (
        "prompt_ids_drifted: NOT_SEEN: 0 rows whose prompt ids drifted between turns, at least 1 needed "
        "(the fault layer's record of /run answers)"
    )


def test_rows_answered_counts_rows_with_a_successful_answer() -> None:
    history = History()
    _run(history, 0, 1)
    _run(history, 1, 2, status=500)
    _run(history, 2, 2)
    assert witnesses.rows_answered(history) == witnesses.Count(2, "rows [0, 2]")
    assert witnesses.rows_answered(History()) == witnesses.Count(0)


def test_multi_turn_rows_counts_answers_with_two_model_calls_or_more() -> None:
    history = History()
    _run(history, 0, 1)
    _run(history, 1, 2)
    _run(history, 2, 3)
    [sighting] = witnesses.look(history, {"multi_turn_rows": 3})
    assert (sighting.count.seen, sighting.seen) == (2, False)
    native = History()
    for row, calls in ((0, 2), (1, 1)):
        for _ in range(calls):
            data = {"link": "collector->policy", "server": "policy", "row": row, "status": 200}
            native.append("policy", "ok", "POST /v1/chat/completions", {**data, "generations": ["2:x"]})
    assert witnesses.multi_turn_rows(native).seen == 1


def test_task_groups_stepped_counts_distinct_tasks_in_the_environments_record() -> None:
    history = History()
    history.append("collector", "info", "env_step", {"tasks": ["a", "b", "c"]})  # a claim: not counted
    history.append(
        "resources", "info", "step_batch", {"tasks": ["calculator", "calculator"], "turns": [0, 0]}
    )
    assert witnesses.task_groups_stepped(history).seen == 1
    history.append("resources", "info", "step_batch", {"tasks": ["echo"], "turns": [0]})
    assert witnesses.task_groups_stepped(history) == witnesses.Count(2, "task groups ['calculator', 'echo']")


def test_policy_refused_at_start_counts_refusals_before_the_first_answer() -> None:
    loading = History()
    _policy(loading, 0, status=None, link="collector->policy")
    _policy(loading, 1, status=503)
    _policy(loading, 2, status=200)
    _policy(loading, 3, status=None)  # later refusals are not the start's
    assert witnesses.policy_refused_at_start(loading).seen == 2
    ready = History()
    _policy(ready, 0, status=200)
    _policy(ready, 1, status=None)
    assert witnesses.policy_refused_at_start(ready).seen == 0


def test_generations_at_token_limit_counts_the_policys_length_finishes() -> None:
    history = History()
    for request, finishes in enumerate([["length", "stop"], ["length"], ["stop"]]):
        facts = {"link": "collector->policy", "server": "policy", "status": 200}
        generated = [fingerprint([request, n]) for n in range(len(finishes))]
        data = {**facts, "generations": generated, "finishes": finishes}
        history.append("policy", "ok", "POST /v1/chat/completions", data)
    [sighting] = witnesses.look(history, {"generations_at_token_limit": 2})
    assert sighting.seen
    assert sighting.count.seen == 2
    [unseen] = witnesses.look(History(), {"generations_at_token_limit": 1})
    assert not unseen.seen


def test_policy_refused_at_start_counts_the_links_to_each_policy_replica() -> None:
    loading = History()
    _policy(loading, 0, status=None, link="model->policy[1]")
    _policy(loading, 1, status=502, link="collector->policy[0]")
    _policy(loading, 2, status=200, link="model->policy[0]")
    assert witnesses.policy_refused_at_start(loading).seen == 2
