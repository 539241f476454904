"""The mutation benchmark's own mutator: which mutants it makes of a snippet, that each one changes
its source at its site only, that ids are stable, and that the survivors file is read as written."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from benchmarks._mutants import Mutant, mutants_of
from benchmarks.mutation import REPO, TARGETS, read_triage

SNIPPET = """\
async def first_due(items, limit, history):
    for position, item in enumerate(items):
        if item < limit and not item == 0:
            continue
        try:
            await wait(position, item)
        except ValueError:
            raise
        except KeyError:
            log(item)
            return False
        history.append("collector", "info", "due", {"row": 1})
        return items[position : position + 2][limit]
    return None
"""

EXPECTED = {
    "3:17:cmp_flip": "`<` -> `<=`",
    "3:25:bool_swap": "`and` -> `or`",
    "3:29:not_del": "`not` dropped",
    "3:38:cmp_flip": "`==` -> `!=`",
    "3:41:const_inc": "`0` -> `1`",  # 0 only goes up
    "4:13:continue_del": "continue deleted",
    "6:13:stmt_del": "await deleted",
    "6:24:arg_swap": "first two arguments swapped",
    # ``except ValueError: raise`` as ``pass`` is raise_del itself: one mutant, not two
    "8:13:raise_del": "raise deleted",
    "10:13:except_pass": "except body -> pass",
    "10:13:stmt_del": "call deleted",
    "11:20:bool_flip": "`False` -> `True`",
    "11:20:return_none": "returns None",
    # history.append(...) is the collector's story, read by no judge: none of its parts is mutated
    "13:16:return_none": "returns None",
    "13:22:slice_lower": "slice lower bound + 1",
    "13:33:slice_upper": "slice upper bound + 1",
    "13:44:const_dec": "`2` -> `1`",
    "13:44:const_inc": "`2` -> `3`",
    "13:47:index_off": "index + 1",
    # ``return None`` already returns None
}


def _by_site(mutants: list[Mutant]) -> dict[str, Mutant]:
    return {mutant.id.removeprefix("snippet.py:"): mutant for mutant in mutants}


def test_the_snippet_gets_exactly_the_expected_mutants() -> None:
    made = mutants_of("snippet.py", SNIPPET)
    assert made.unrendered == []
    got = {site: mutant.description.split(" in `")[0] for site, mutant in _by_site(made.mutants).items()}
    assert got == EXPECTED


def test_each_mutant_changes_its_site_and_nothing_else() -> None:
    original = SNIPPET.splitlines()
    for mutant in mutants_of("snippet.py", SNIPPET).mutants:
        mutated = mutant.apply(SNIPPET)
        changed = mutated.splitlines()
        assert len(changed) == len(original), mutant.id  # line numbers stay
        differing = [number for number, (a, b) in enumerate(zip(original, changed, strict=True), 1) if a != b]
        assert differing, mutant.id
        assert differing[0] == mutant.line, mutant.id
        first, last = mutant.lines
        assert all(first <= number <= last for number in differing), (mutant.id, differing)
        before_site = mutant.col - 1
        assert changed[mutant.line - 1][:before_site] == original[mutant.line - 1][:before_site], mutant.id
        assert ast.dump(ast.parse(mutated)) != ast.dump(ast.parse(SNIPPET)), mutant.id
        compile(mutated, "snippet.py", "exec")


def test_a_comparison_flip_edits_only_its_operator() -> None:
    mutant = _by_site(mutants_of("snippet.py", SNIPPET).mutants)["3:38:cmp_flip"]
    assert mutant.apply(SNIPPET).splitlines()[2] == "        if item < limit and not item != 0:"


def test_ids_are_stable_and_unique() -> None:
    first = [mutant.id for mutant in mutants_of("snippet.py", SNIPPET).mutants]
    assert first == [mutant.id for mutant in mutants_of("snippet.py", SNIPPET).mutants]
    assert len(set(first)) == len(first)
    assert all(re.fullmatch(r"snippet\.py:\d+:\d+:[a-z_]+\d*'*", mutant_id) for mutant_id in first)
    # code added after a site leaves that site's id as it was
    grown = [
        mutant.id for mutant in mutants_of("snippet.py", SNIPPET + "\n\ndef later():\n    return 1\n").mutants
    ]
    assert grown[: len(first)] == first
    assert grown[len(first) :] == [
        f"snippet.py:18:12:{operator}" for operator in ("const_dec", "const_inc", "return_none")
    ]


def test_every_target_file_mutates_and_compiles() -> None:
    for path in TARGETS:
        source = (REPO / path).read_text()
        made = mutants_of(path, source)
        assert made.unrendered == [], path
        assert made.mutants, path
        for mutant in made.mutants:
            compile(mutant.apply(source), path, "exec")


def test_the_survivors_file_is_read_by_its_table_rows(tmp_path: Path) -> None:
    survivors = tmp_path / "survivors.md"
    survivors.write_text(
        "# Survivors\n\n| mutant | change | verdict | why |\n|---|---|---|---|\n"
        "| `a.py:3:17:cmp_flip` | `<` -> `<=` | equivalent | limit is never equal to an item |\n"
        "| `a.py:6:13:stmt_del` | await deleted | not caught yet | a scenario that delays wait() |\n"
        "| `a.py:9:1:const_inc` | `0` -> `1` | maybe | not a verdict, so not triaged |\n"
    )
    assert read_triage(survivors) == {
        "a.py:3:17:cmp_flip": ("equivalent", "limit is never equal to an item"),
        "a.py:6:13:stmt_del": ("not caught yet", "a scenario that delays wait()"),
    }
    assert read_triage(tmp_path / "missing.md") == {}
