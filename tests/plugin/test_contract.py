"""A collector that breaks its contract fails its scenario with one ``CollectorContractError``:
the story names the collector and what it returned, with no traceback through the harness."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BREAKERS = Path(__file__).with_name("_contract_breakers.py")
SCENARIO = """\
name: contract
description: Two rows and no fault; only the collector's contract is at stake.
workload:
  rows_per_task: 2
expect:
  invariants: [accounted]
  witness: {rows_answered: 1}
"""


@pytest.mark.parametrize(
    ("target", "says"),
    [
        (
            "raising_factory",
            "the factory raised RuntimeError: no GPU configured for the rollout workers "
            "(at *contract_breakers.py:*",
        ),
        (
            "SyncCollect",
            "*SyncCollect.collect is a plain function, *; expected async def collect(self, rows, *",
        ),
        ("ReturnsDict", "*collect returned {'rollouts': *(dict); expected a list of Rollout, one per row*"),
        ("OneBased", "*collect returned rollouts for row_index [[]2[]], which were never requested*"),
    ],
    ids=["factory-raises", "sync-collect", "not-a-list", "unknown-row"],
)
def test_a_contract_breach_fails_the_scenario_naming_the_collector(
    pytester: pytest.Pytester, target: str, says: str
) -> None:
    pytester.makefile(".chaos.yaml", contract=SCENARIO)
    pytester.makepyfile(contract_breakers=BREAKERS.read_text(encoding="utf-8"))
    pytester.syspathinsert()
    result = pytester.runpytest(
        "--rollout-chaos", f"--rollout-chaos-target=contract_breakers:{target}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "scenario 'contract' failed (contract.chaos.yaml:1)",
            "CollectorContractError:",
            f"  collector 'contract_breakers:{target}' (*contract_breakers.py:*): {says}",
            "hint: the collector under test does not keep its contract*",
        ]
    )
    result.stdout.no_fnmatch_line("*engine/run.py*")
    result.stdout.no_fnmatch_line("*scenario_items.py*")
    result.stdout.no_fnmatch_line("*Traceback*")
