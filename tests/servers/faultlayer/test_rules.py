"""Fault-layer rule matching as a table: route forms, nth/every/count, seeded probability, bad input."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.servers.faultlayer.rules import Match, RuleError, parse_rule


@pytest.mark.parametrize(
    ("route", "path", "expected"),
    [
        ("/run", "/run", True),
        ("/run", "/run/x", False),
        ("/v1/", "/v1/chat/completions", True),
        ("/v1*", "/v1/responses", True),
        ("/v1/*", "/v2/responses", False),
        (None, "/anything", True),
    ],
)
def test_route_forms(route: str | None, path: str, expected: bool) -> None:
    assert Match(route=route).route_matches(path) is expected


@pytest.mark.parametrize(
    ("match", "fires_on"),
    [
        ({}, [1, 2, 3, 4, 5, 6]),
        ({"nth": 3}, [3]),
        ({"every": 2}, [1, 3, 5]),
        ({"nth": 2, "every": 3}, [2, 5]),
        ({"every": 1, "count": 2}, [1, 2]),
        ({"nth": 2, "every": 1, "count": 3}, [2, 3, 4]),
    ],
)
def test_positions_and_count(match: dict[str, int], fires_on: list[int]) -> None:
    rule = parse_rule("r1", {"server": "s", "effect": "delay", "match": match})
    assert [n for n in range(1, 7) if rule.consider("s", "/x", None)] == fires_on


def test_row_filter_counts_only_that_rows_requests() -> None:
    rule = parse_rule("r1", {"server": "s", "effect": "delay", "match": {"row": 2, "nth": 2}})
    fired = [row for row in (1, 2, 3, 2, 2) if rule.consider("s", "/run", row)]
    assert fired == [2]
    assert (rule.candidates, rule.hits) == (3, 1)


def test_probability_is_reproducible_for_the_same_seed_and_rule_id() -> None:
    def pattern(seed: int, rule_id: str) -> list[bool]:
        rule = parse_rule(
            rule_id, {"server": "s", "effect": "delay", "match": {"probability": 0.5}, "seed": seed}
        )
        return [rule.consider("s", "/x", None) for _ in range(40)]

    assert pattern(7, "r1") == pattern(7, "r1")
    assert pattern(7, "r1") != pattern(8, "r1")
    assert 10 <= sum(pattern(7, "r1")) <= 30


def test_seed_comes_from_the_environment_when_the_rule_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_CHAOS_SEED", "7")
    from_env = parse_rule("r1", {"server": "s", "effect": "delay", "match": {"probability": 0.5}})
    explicit = parse_rule("r1", {"server": "s", "effect": "delay", "match": {"probability": 0.5}, "seed": 7})
    assert [from_env.consider("s", "/x", None) for _ in range(20)] == [
        explicit.consider("s", "/x", None) for _ in range(20)
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], r"rule: expected a JSON object"),
        (
            {"server": "s", "effect": "delay", "match": {"route": "run"}},
            r"match.route: expected a path starting with '/'",
        ),
        (
            {"server": "s", "effect": "delay", "match": {"probability": 2}},
            r"match.probability: expected a number in \[0, 1\]",
        ),
        ({"server": "s", "effect": "delay", "delay_ms": -5}, r"delay_ms: expected a number >= 0, got -5"),
        ({"server": "s", "effect": "exit", "code": 0}, r"effect: unknown effect .exit. \(known: delay, hang"),
        ({"effect": "delay"}, r"server: expected the name of the server the rule applies to, got None"),
        (
            {"server": "s", "effect": "hang", "max_hang_s": "long"},
            r"max_hang_s: expected int or float or null, got 'long'",
        ),
    ],
)
def test_bad_rules_name_the_field(body: object, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        parse_rule("r1", body)
