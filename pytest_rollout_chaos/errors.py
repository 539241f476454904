"""The exception hierarchy: what went wrong, said so that a CI log reads as a bug report.

A ``ChaosError`` raised in fixture setup reads as a pytest *error* (broken environment);
an ``InvariantViolation`` raised in the call phase reads as a *failure* (the collector
under test misbehaved).
"""

from __future__ import annotations

from typing import Final

NOT_JUDGED_PREFIX: Final = "NOT_JUDGED: "
"""How the skip of a scenario a collector declined to judge begins (``NotJudgedError``)."""


class ChaosError(Exception):
    """Base of every error this plugin raises on purpose."""


class ScenarioError(ChaosError):
    """A scenario file is invalid; the message starts with ``path:line: field:``."""


class VacuousScenarioError(ScenarioError):
    """A scenario ran but judged nothing of what it says it tests: an invariant it lists found
    nothing to judge (NOT_JUDGED) without ``expect.not_judged`` saying why, or a witness it names in
    ``expect.witness`` was not seen. Such a run proves nothing, so it fails."""


class ServerStartError(ChaosError):
    """A managed server exited early or did not become ready before its deadline."""


class ServerCrashedError(ChaosError):
    """A managed server exited while it was still needed (exit code 0 included)."""


class FaultError(ChaosError):
    """A fault could not be injected or healed."""


class CollectorTargetError(ChaosError):
    """``--rollout-chaos-target`` does not name a usable collector factory."""


class CollectorContractError(ChaosError):
    """The collector under test broke its contract (ARCHITECTURE.md#the-collector-contract): its
    factory raised, its ``collect`` is not async, or it returned something other than one Rollout
    per requested row. The message names the collector, what was expected and what came back."""


class NotJudgedError(ChaosError):
    """The collector cannot judge this scenario on this trainer and says why, before it runs
    anything: an adapter whose copy of upstream lines no longer matches the tree, for one. The
    scenario is then neither passed nor failed: it skips with ``NOT_JUDGED: <why>``, and
    ``rollout-chaos gate`` counts it as not judged, never as fixed or regressed."""


class CannotRunHere(ChaosError):
    """The scenario cannot run on this stack with this collector, and the message says why (the
    fit step, ``engine.fit``). Nothing was judged: a runner reports it as a skip (pytest's item
    does), never as a pass or a failure."""


class InvariantViolation(AssertionError):
    """One or more invariants judged the run FAIL; the message lists every failing verdict."""
