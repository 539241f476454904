"""Running many invariants: a crashing checker gives UNKNOWN, never PASS; the worst verdict wins."""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping, Sequence

from pytest_rollout_chaos.errors import InvariantViolation
from pytest_rollout_chaos.invariants import registry
from pytest_rollout_chaos.invariants.base import Checker, Observation, Status, Verdict, not_judged


def check_one(checker: Checker, observation: Observation) -> Verdict:
    """``checker.check`` with any exception turned into an UNKNOWN carrying the traceback."""
    name = getattr(checker, "name", type(checker).__name__)
    try:
        result = checker.check(observation)
    except Exception as error:
        lines = traceback.format_exception(error)
        return Verdict(
            name,
            Status.UNKNOWN,
            f"the checker crashed ({type(error).__name__}: {error}); the run cannot be judged",
            tuple("".join(lines).rstrip().splitlines()),
        )
    if not isinstance(result, Verdict):
        return Verdict(name, Status.UNKNOWN, f"the checker returned {type(result).__name__}, not a Verdict")
    return result


def check_all(
    observation: Observation,
    checkers: Iterable[Checker | str] | None = None,
    *,
    not_applicable: Mapping[str, str] | None = None,
) -> list[Verdict]:
    """Every verdict, in order; names are looked up in the registry. A checker named in
    ``not_applicable`` (it does not apply to the collector under test) is not run: its verdict is
    NOT_JUDGED with the reason given."""
    chosen = registry.CHECKERS if checkers is None else checkers
    reasons = not_applicable or {}
    verdicts = []
    for given in chosen:
        checker = registry.get(given) if isinstance(given, str) else given
        name = getattr(checker, "name", type(checker).__name__)
        verdicts.append(
            not_judged(name, reasons[name]) if name in reasons else check_one(checker, observation)
        )
    return verdicts


def worst(verdicts: Sequence[Verdict]) -> Status:
    """FAIL over UNKNOWN over NOT_JUDGED over PASS; no verdicts at all is UNKNOWN (nothing was judged)."""
    if not verdicts:
        return Status.UNKNOWN
    return max((verdict.status for verdict in verdicts), key=lambda status: status.rank)


def assert_all_pass(
    verdicts: Sequence[Verdict], *, allow_unknown: bool = False, allow_not_judged: bool = False
) -> None:
    """Raise ``InvariantViolation`` listing every verdict that is not PASS.

    An invariant asked for by name that found nothing to judge (NOT_JUDGED) fails too, as it does
    a scenario that lists it, unless ``allow_not_judged`` says the caller checks a generic list.
    """
    __tracebackhide__ = True
    allowed = {Status.PASS}
    allowed |= {Status.UNKNOWN} if allow_unknown else set()
    allowed |= {Status.NOT_JUDGED} if allow_not_judged else set()
    bad = [v for v in verdicts if v.status not in allowed]
    if bad:
        raise InvariantViolation("\n".join(verdict.render() for verdict in bad))
