"""ARCHITECTURE.md's four recipes ("Adding a fault", "... an invariant", "... a scenario", "... an
adapter") held against the tree: every registered entry has each file and entry its recipe names,
and one that lacks it fails in the recipe's own words (``Adding an invariant, step 3: ...``), with
the text of each step it breaks quoted below.

What another test already holds is left to it, and a comment names that test. An entry that
lacks something for a reason is listed here with the reason, and each list is held to the tree
too: an entry that no longer lacks anything must leave its list, so the lists only shrink.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Final

import pytest

from fixtures.collectors import KNOWN_BUGS
from pytest_rollout_chaos import targets
from pytest_rollout_chaos.faults import registry as faults
from pytest_rollout_chaos.faults._toxic_fault import ToxicFault
from pytest_rollout_chaos.invariants import registry as invariants
from pytest_rollout_chaos.scenario.model import Scenario, load_scenario
from pytest_rollout_chaos.servers.toxiproxy.toxics import TOXIC_TYPES
from tests.catalog.test_catalog import (
    ALSO_CAUGHT,
    CAUGHT_BY,
    DRIFT_SCENARIOS,
    HOST_SCENARIOS,
    REPLICA_SCENARIOS,
)
from tests.collector.adapters.test_gates import PAIRS

ROOT: Final = Path(__file__).resolve().parents[1]
HERE: Final = "tests/test_recipes.py"
ADAPTER_TESTS: Final = "tests/collector/adapters"

FAULT: Final = "Adding a fault"
INVARIANT: Final = "Adding an invariant"
SCENARIO: Final = "Adding a scenario"
ADAPTER: Final = "Adding an adapter"

# What each recipe step must name, because the tests below hold the tree to it there.
NAMED: Final = {
    (FAULT, 1): ("faults/<kind>.py", "servers/toxiproxy/toxics.py", "servers/faultlayer/effects.py"),
    (FAULT, 3): ("FAULT_TYPES", "faults/registry.py", "scenarios/README.md", "docs/ray.md"),
    (FAULT, 4): (
        "tests/faults/test_<kind>.py",
        "CATALOG",
        "tests/faults/test_registry.py",
        "catalog scenario",
    ),
    (INVARIANT, 1): ("invariants/<name>.py",),
    (INVARIANT, 2): ("STANDING",),
    (INVARIANT, 3): (
        "CHECKERS",
        "invariants/registry.py",
        "INTERFACE_NAMES",
        "tests/_invariant_names.py",
        "docs/invariants.md",
        "scenarios/README.md",
    ),
    (INVARIANT, 4): (
        "tests/invariants/test_<name>.py",
        "fixtures/collectors/",
        "KNOWN_BUGS",
        "CAUGHT_BY",
        "tests/catalog/test_catalog.py",
    ),
    (SCENARIO, 1): ("scenarios/NAME.chaos.yaml", "upstream"),
    (SCENARIO, 2): ("docs/catalog.md",),
    (SCENARIO, 3): (
        "CAUGHT_BY",
        "REPLICA_SCENARIOS",
        "HOST_SCENARIOS",
        "DRIFT_SCENARIOS",
        "tests/catalog/test_catalog.py",
        HERE,
    ),
    (ADAPTER, 1): ("collector/adapters/<name>.py", "factory", "GYM_CLIENT", "UPSTREAM"),
    (ADAPTER, 2): ("test_<trainer>_settings.py",),
    (ADAPTER, 3): ("targets.ADAPTERS", "docs/gating.md"),
    (ADAPTER, 4): (
        "tests/collector/adapters/",
        "tests/upstream/",
        "SOURCES.md",
        "PAIRS",
        "tests/collector/adapters/test_gates.py",
    ),
}

# Fault kinds whose test is a shared module of tests/faults/, and why.
SHARED_FAULT_TESTS: Final = {
    # the two Ray faults: off Ray both are refused alike, tested together; on a cluster in tests/ray
    "actor_kill": "test_ray_faults.py",
    "node_down": "test_ray_faults.py",
}
# Fault kinds no catalog scenario uses: step 4 asks for one only where a kind models a real failure.
NO_SCENARIO: Final = {
    "bandwidth": "a Toxiproxy toxic, kept for parity with Toxiproxy; no catalog failure is a slow link",
    "slicer": "a Toxiproxy toxic, kept for parity with Toxiproxy; no catalog failure is a sliced stream",
    "slow_close": "a Toxiproxy toxic, kept for parity with Toxiproxy; no catalog failure is a slow close",
    "restart": "the catalog's restarted server is a Ray actor (agent-actor-restarted: actor_kill, restart)",
    "slow_env": "validation-batched-env slows the environment by its stack (env_latency_ms_*), not a fault",
}
# Invariants that no known-bug collector breaks: the test where another collector is shown
# failing them, and why no known-bug collector does.
NO_KNOWN_BUG: Final = {
    "train_batch_sound": (
        "tests/collector/adapters/test_slime.py",
        "it judges the batch a trainer trains on; slime's own code, through the slime adapter, hands "
        "aborted placeholders to training there",
    ),
}
# Catalog scenarios that no known-bug collector of tests/catalog/test_catalog.py fails, with the
# test where another collector (a pinned trainer tree, a known-bug collector run elsewhere) does.
FAILED_ELSEWHERE: Final = {
    "verifier-exception-isolated": "tests/collector/adapters/test_gates.py",  # SkyRL, the base of PR #1986
    # slime, the head of PR #2078: a regression
    "model-link-reset": "tests/collector/adapters/test_gates.py",
    "resources-exit-zero": "tests/collector/adapters/test_gates.py",  # the same
    "truncated-run-response": "tests/collector/adapters/test_gates.py",  # the same
    "group-nan-logprobs": "tests/collector/adapters/test_groups.py",  # every trainer's pinned tree
    "group-agent-killed": "tests/collector/adapters/test_groups.py",  # the same
    "policy-nan-logprobs": "tests/integration/test_policy_faults.py",  # nan_silent
    # the reference collector with a gateway's 502 or 504 taken for "ready"
    "policy-gateway-not-ready": "tests/integration/test_policy_faults.py",
}
# The fault-free control, which every known-bug collector must pass (tests/catalog/test_catalog.py).
CONTROL: Final = "baseline"
_TWIN: Final = "no known-bug collector is run on it, only on its twin {}"
_NONE: Final = "no known-bug collector or pinned trainer tree is shown to fail it"
# Scenarios that break step 3: no test shows a collector failing them. Found when this test was
# written (issue #36); a collector shown failing one (CAUGHT_BY, FAILED_ELSEWHERE) takes it off.
UNPROVEN: Final = {
    "nan-logprobs-http-500": _TWIN.format("nan-logprobs-nan"),
    "nan-logprobs-inf": _TWIN.format("nan-logprobs-nan"),
    "nan-logprobs-null": _TWIN.format("nan-logprobs-nan"),
    "native-train-nan-logprobs": _TWIN.format("nan-logprobs-nan"),
    "native-nan-logprobs-retry-rewards": _TWIN.format("nan-logprobs-retry-rewards"),
    "token-limit-truncated": _TWIN.format("native-token-limit-truncated"),
    "agent-oom-killed": _NONE,
    "latency-under-load": _NONE,
    "model-link-blackhole": _NONE,
    "model-malformed-json": _NONE,
    "policy-503-storm": f"{_NONE} (SkyRL's PR #1986 moves it by chance only: {ADAPTER_TESTS}/test_gates.py)",
    "policy-not-ready-at-start": _NONE,
    "agent-actor-restarted": _NONE,
    "rollout-node-lost": _NONE,
}
# Trainers with no gate in PAIRS (tests/collector/adapters/test_gates.py), and why.
NO_GATE: Final = {
    "verl": "its NeMo Gym recipe is pinned at verl-recipe PR #80 alone: no upstream fix of it to gate yet",
    "nemo_gym": "its code is the wheel in NeMo Gym's interpreter: no upstream fix of it to gate yet",
}
# Trainers with no pinned tree in tests/upstream/, and what their tests run instead.
NO_TREE: Final = {
    "nemo_gym": "NeMo Gym runs in an interpreter of its own (--rollout-chaos-gym-python): CI's venvs of the "
    "versions servers/nemo_gym/locate.py TESTED_VERSIONS names (tests/nemo_gym/test_target.py)",
}


@cache
def recipe_steps(title: str) -> dict[int, str]:
    """The numbered steps of ARCHITECTURE.md's ``## {title}``, each on one line."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    if f"\n## {title}\n" not in text:
        pytest.fail(f"ARCHITECTURE.md has no section '## {title}'", pytrace=False)
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^(\d+)\. ", section, flags=re.MULTILINE)
    return {
        int(number): " ".join(body.split()) for number, body in zip(parts[1::2], parts[2::2], strict=True)
    }


class Recipe:
    """What the tree lacks against one recipe, told in the recipe's words."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.problems: set[tuple[int, str]] = set()

    def step(self, number: int, problem: str) -> None:
        self.problems.add((number, problem))

    def check(self) -> None:
        """Fail with ``{title}, step N: problem`` for each problem, then the text of each step broken."""
        if not self.problems:
            return
        steps = recipe_steps(self.title)
        lines = [f"{self.title}, step {number}: {problem}" for number, problem in sorted(self.problems)]
        lines += ["", "ARCHITECTURE.md:"]
        for number in sorted({number for number, _ in self.problems}):
            lines.append(f"  {self.title}, step {number}. {steps.get(number, '(no such step)')}")
        pytest.fail("\n".join(lines), pytrace=False)


def read(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def between(relative: str, start: str, end: str) -> str:
    """The text of ``relative`` from ``start`` to ``end``; a failure naming both if either is gone."""
    text = read(relative)
    if start not in text or end not in text.split(start, 1)[1]:
        pytest.fail(f"{relative}: cannot find its part from {start!r} to {end!r}", pytrace=False)
    return text.split(start, 1)[1].split(end, 1)[0]


def quoted(text: str) -> set[str]:
    """Every name in backquotes in ``text``."""
    return set(re.findall(r"`([\w.-]+)`", text))


def table_rows(text: str) -> set[str]:
    """The names in backquotes that begin a table row of ``text``."""
    return set(re.findall(r"^\| `([\w.-]+)` \|", text, flags=re.MULTILINE))


def mentions(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


@cache
def catalog() -> tuple[Scenario, ...]:
    return tuple(load_scenario(path) for path in sorted((ROOT / "scenarios").glob("*.chaos.yaml")))


@pytest.mark.parametrize(("title", "number"), list(NAMED))
def test_each_recipe_step_names_what_this_module_holds_it_to(title: str, number: int) -> None:
    text = recipe_steps(title).get(number, "")
    missing = [name for name in NAMED[title, number] if name not in text]
    assert not missing, (
        f"{title}, step {number} (ARCHITECTURE.md) does not name {missing}, which {HERE} checks"
    )


def test_adding_a_fault() -> None:
    recipe = Recipe(FAULT)
    listed = quoted(between("scenarios/README.md", "Fault kinds (", "\nTargets:"))
    in_ray_table = table_rows(read("docs/ray.md"))
    used = {step.kind for scenario in catalog() for step in scenario.faults}
    for cls in faults.FAULT_TYPES:
        kind = cls.kind
        if cls.__module__ != f"pytest_rollout_chaos.faults.{kind}":
            recipe.step(1, f"fault {kind!r} ({cls.__name__}) is in {cls.__module__}, not faults/{kind}.py")
        if issubclass(cls, ToxicFault) and cls.toxic_type not in TOXIC_TYPES:
            recipe.step(
                1,
                f"fault {kind!r}, a ToxicFault: its toxic_type {cls.toxic_type!r} is not in TOXIC_TYPES of "
                "servers/toxiproxy/toxics.py",
            )
        # A LayerFault's effect in servers/faultlayer/effects.py: tests/faults/test_layer_effects.py.
        # FAULT_TYPES is what this walks; the docs' fault reference, generated from it, is held to
        # it by tests/docs/test_docs.py.
        if kind not in listed:
            recipe.step(3, f"fault {kind!r} is not in the list of fault kinds of scenarios/README.md")
        if cls.family == "ray" and kind not in in_ray_table:
            recipe.step(3, f"Ray fault {kind!r} has no row in the table of docs/ray.md")
        # CATALOG of tests/faults/test_registry.py is held to FAULT_TYPES by that module.
        test = SHARED_FAULT_TESTS.get(kind, f"test_{kind}.py")
        if not (ROOT / "tests" / "faults" / test).is_file():
            recipe.step(4, f"fault {kind!r} has no test: tests/faults/{test} is missing")
        elif kind in SHARED_FAULT_TESTS and not mentions(read(f"tests/faults/{test}"), kind):
            recipe.step(
                4, f"tests/faults/{test}, the test of fault {kind!r} in SHARED_FAULT_TESTS, never names it"
            )
        if kind not in used and kind not in NO_SCENARIO:
            recipe.step(
                4,
                f"fault {kind!r} is used by no catalog scenario (scenarios/); if it models no real failure, "
                f"say so in NO_SCENARIO of {HERE}",
            )
    for kind in SHARED_FAULT_TESTS:
        if kind not in faults.FAULTS or (ROOT / "tests" / "faults" / f"test_{kind}.py").is_file():
            recipe.step(
                4, f"SHARED_FAULT_TESTS of {HERE} lists {kind!r}: no such fault, or it has its own test"
            )
    for kind in NO_SCENARIO:
        if kind not in faults.FAULTS or kind in used:
            recipe.step(4, f"NO_SCENARIO of {HERE} lists {kind!r}: no such fault, or a scenario uses it")
    recipe.check()


def test_adding_an_invariant() -> None:
    recipe = Recipe(INVARIANT)
    in_table = table_rows(between("scenarios/README.md", "\n## Invariants\n", "\n## Witnesses\n"))
    for checker in invariants.CHECKERS:
        name, cls = checker.name, type(checker)
        if cls.__module__ != f"pytest_rollout_chaos.invariants.{name}":
            recipe.step(
                1, f"invariant {name!r} ({cls.__name__}) is in {cls.__module__}, not invariants/{name}.py"
            )
        # STANDING is held to both pages' standing list by tests/docs/test_docs.py. CHECKERS is what
        # this walks; INTERFACE_NAMES is held to it by tests/invariants/test_registry.py, and the
        # sections of docs/invariants.md by tests/docs/test_docs.py.
        if name not in in_table:
            recipe.step(3, f"invariant {name!r} has no row in the invariants table of scenarios/README.md")
        test = f"tests/invariants/test_{cls.__module__.rsplit('.', 1)[-1]}.py"
        if not (ROOT / test).is_file():
            recipe.step(4, f"invariant {name!r} ({cls.__name__}) has no test: {test} is missing")
        elif not mentions(read(test), cls.__name__):
            recipe.step(4, f"{test}, the test of invariant {name!r}, never names {cls.__name__}")
        collectors = sorted(module for module, invariant in KNOWN_BUGS.items() if invariant == name)
        if not collectors and name not in NO_KNOWN_BUG:
            recipe.step(
                4,
                f"invariant {name!r} is broken by no known-bug collector: none in KNOWN_BUGS of "
                "fixtures/collectors/",
            )
        # That CAUGHT_BY and KNOWN_BUGS agree, collector by collector, and that each one's scenario
        # exists is held by tests/catalog/test_catalog.py, which is slow: the fast loop checks here.
        for module in collectors:
            if not (ROOT / "fixtures" / "collectors" / f"{module}.py").is_file():
                recipe.step(
                    4,
                    f"invariant {name!r}: its known-bug collector fixtures/collectors/{module}.py is missing",
                )
            if CAUGHT_BY.get(module, ("", ""))[1] != name:
                recipe.step(
                    4,
                    f"invariant {name!r}: its known-bug collector {module!r} is not in CAUGHT_BY of "
                    "tests/catalog/test_catalog.py with the scenario that catches it",
                )
    for name, (test, _why) in NO_KNOWN_BUG.items():
        if name not in invariants.BY_NAME or name in KNOWN_BUGS.values():
            recipe.step(
                4,
                f"NO_KNOWN_BUG of {HERE} lists {name!r}: no such invariant, or a known-bug collector "
                "breaks it",
            )
        elif not mentions(read(test), name):
            recipe.step(4, f"{test}, named for invariant {name!r} in NO_KNOWN_BUG of {HERE}, never names it")
    recipe.check()


def test_adding_a_scenario() -> None:
    recipe = Recipe(SCENARIO)
    scenarios = {scenario.name for scenario in catalog()}
    # Step 1 (valid, named after its file, citing upstream) is held by tests/scenario/test_catalog.py.
    count = re.search(r"`scenarios/` holds (\d+) scenarios", read("docs/catalog.md"))
    if count is None:
        recipe.step(2, "docs/catalog.md no longer says how many scenarios `scenarios/` holds")
    elif int(count[1]) != len(scenarios):
        recipe.step(
            2, f"docs/catalog.md says `scenarios/` holds {count[1]} scenarios; it holds {len(scenarios)}"
        )
    caught = (
        {scenario for scenario, _ in CAUGHT_BY.values()}
        | set(REPLICA_SCENARIOS)
        | set(HOST_SCENARIOS)
        | set(DRIFT_SCENARIOS)
    )
    caught |= set(ALSO_CAUGHT)
    for name in sorted(scenarios - caught - {CONTROL} - set(UNPROVEN)):
        test = FAILED_ELSEWHERE.get(name)
        if test is None:
            recipe.step(
                3,
                f"scenario {name!r} is failed by no known-bug collector: it is in none of CAUGHT_BY, "
                "ALSO_CAUGHT, REPLICA_SCENARIOS, HOST_SCENARIOS and DRIFT_SCENARIOS "
                f"(tests/catalog/test_catalog.py), nor in FAILED_ELSEWHERE of {HERE}",
            )
        elif not mentions(read(test), name):
            recipe.step(
                3, f"{test}, named for scenario {name!r} in FAILED_ELSEWHERE of {HERE}, never names it"
            )
    for listing, entries in (("FAILED_ELSEWHERE", set(FAILED_ELSEWHERE)), ("UNPROVEN", set(UNPROVEN))):
        for name in sorted(entries - (scenarios - caught - {CONTROL})):
            recipe.step(
                3, f"{listing} of {HERE} lists {name!r}: no such scenario, or a known-bug collector fails it"
            )
    for name in sorted(set(FAILED_ELSEWHERE) & set(UNPROVEN)):
        recipe.step(3, f"{name!r} is in both FAILED_ELSEWHERE and UNPROVEN of {HERE}")
    recipe.check()


def test_adding_an_adapter() -> None:
    recipe = Recipe(ADAPTER)
    in_gating = quoted(
        "\n".join(line for line in read("docs/gating.md").splitlines() if line.startswith("| `"))
    )
    tests = [path.read_text(encoding="utf-8") for path in (ROOT / ADAPTER_TESTS).glob("test_*.py")]
    trees = sorted(
        path.name.removesuffix(".tar.gz") for path in (ROOT / "tests" / "upstream").glob("*.tar.gz")
    )
    sources = table_rows(read("tests/upstream/SOURCES.md"))
    gated = {targets.ADAPTERS.get(pair.target) for pair in PAIRS.values()}
    for name, trainer in targets.ADAPTERS.items():
        # Step 1 (the module, its factory, UPSTREAM and GYM_CLIENT) is held by tests/test_targets.py.
        if not (ROOT / ADAPTER_TESTS / f"test_{trainer}_settings.py").is_file():
            recipe.step(2, f"adapter {name!r}: {ADAPTER_TESTS}/test_{trainer}_settings.py is missing")
        # targets.ADAPTERS is what this walks.
        if name not in in_gating:
            recipe.step(3, f"adapter {name!r} is not named in the table of docs/gating.md")
        if not any(mentions(text, name) for text in tests):
            recipe.step(4, f"adapter {name!r} is tested by no module of {ADAPTER_TESTS}/")
        prefix = trainer.replace("_", "-") + "-"
        own = [tree for tree in trees if tree.startswith(prefix)]
        if not own and trainer not in NO_TREE:
            recipe.step(
                4, f"adapter {name!r}: no pinned tree of {trainer} in tests/upstream/ ({prefix}*.tar.gz)"
            )
        for tree in own:
            if tree not in sources:
                recipe.step(
                    4, f"adapter {name!r}: its pinned tree {tree!r} has no row in tests/upstream/SOURCES.md"
                )
        if trainer not in gated and trainer not in NO_GATE:
            recipe.step(
                4,
                f"adapter {name!r}: no gate of {trainer} in PAIRS of {ADAPTER_TESTS}/test_gates.py (a "
                "catalog scenario red on a pre-fix tree, green on the fixing tree)",
            )
    for trainer in NO_GATE:
        if trainer not in targets.TRAINERS or trainer in gated:
            recipe.step(4, f"NO_GATE of {HERE} lists {trainer!r}: no such trainer, or PAIRS gates it")
    for trainer in NO_TREE:
        has_tree = any(tree.startswith(trainer.replace("_", "-") + "-") for tree in trees)
        if trainer not in targets.TRAINERS or has_tree:
            recipe.step(4, f"NO_TREE of {HERE} lists {trainer!r}: no such trainer, or it has a tree")
    recipe.check()
