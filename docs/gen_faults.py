"""The fault reference of ``docs/faults.md``, written from the fault registry.

``docs/faults.md`` holds the hand-written part (how faults reach the servers), then one marker
line, ``FAULTS_MARKER``, and below it one section per registered fault kind: its family, what it
does (its module's and its class's docstrings), its valid targets, what it needs to act and its
parameters with types, bounds, defaults and meaning, all read from the fault class itself
(``family``, ``targets``, ``needs``). The part below the marker is kept in the repository, so the
site builds with MkDocs alone, without the package and its runtime (aiohttp, torch);
``tests/docs/test_docs.py`` fails when it differs from what the registry gives.

``python docs/gen_faults.py`` rewrites it; ``--check`` only says whether it is current (exit 1).
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.scenario import vocabulary

FAULTS_MARKER: Final = (
    "<!-- generated from the fault registry by docs/gen_faults.py: edit above this line -->"
)
PAGE: Final = Path(__file__).resolve().parent / "faults.md"
FAMILY_TITLES: Final = {
    "network": "Network faults (Toxiproxy, on a link)",
    "process": "Process faults (on a server's process group)",
    "ray": "Ray faults (with --rollout-chaos-ray)",
    "semantic": "Semantic faults (the fault layer, the Gym client, the collection)",
}


def fault_facts(cls: type[Any]) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    """``(kind, family, targets, needs)`` of a registered fault class: the one place the page reads them."""
    kind = str(cls.kind)
    return kind, str(cls.family), vocabulary.targets_for(kind), tuple(need.value for need in cls.needs)


def render() -> str:
    """The generated part of the page: one section per family, one entry per kind, registry order."""
    by_family: dict[str, list[type[Any]]] = {}
    for cls in registry.FAULT_TYPES:
        by_family.setdefault(fault_facts(cls)[1], []).append(cls)
    lines: list[str] = []
    for family, classes in by_family.items():
        lines += [f"## {FAMILY_TITLES.get(family, family.capitalize() + ' faults')}", ""]
        for cls in classes:
            lines += list(_entry(cls))
    return "\n".join(lines).rstrip() + "\n"


def page(source: str) -> str:
    """The faults page ``source`` with everything below its marker line written anew by ``render``."""
    written, marker, _ = source.partition(FAULTS_MARKER + "\n")
    if not marker:
        raise ValueError(f"docs/{PAGE.name}: the marker line {FAULTS_MARKER!r} is missing")
    return f"{written}{marker}\n{render()}"


def _entry(cls: type[Any]) -> Iterator[str]:
    kind, _family, targets, needs = fault_facts(cls)
    yield f"### `{kind}`"
    yield ""
    module_doc = (inspect.getdoc(sys.modules[cls.__module__]) or "").split("\n\n", 1)[0]
    class_doc = inspect.getdoc(cls) or ""
    for text in (module_doc, class_doc):
        if text:
            yield _markdown(" ".join(text.split()))
            yield ""
    yield "**Targets:** " + ", ".join(f"`{target}`" for target in targets)
    yield ""
    yield "**Needs:** " + "; ".join(_markdown(need) for need in needs)
    yield ""
    rows = [parameter for parameter in registry.parameters(kind) if parameter.name != "target"]
    if not rows:
        yield "No parameters besides `target`."
        yield ""
        return
    yield "| parameter | type | default | meaning |"
    yield "|---|---|---|---|"
    for parameter in rows:
        default = "required" if parameter.required else _default(parameter.default)
        yield f"| `{parameter.name}` | {_type(parameter)} | {default} | {_cell(parameter.help)} |"
    yield ""


def _type(parameter: registry.Parameter) -> str:
    text = " \\| ".join(f"`{choice}`" for choice in parameter.choices) or parameter.type
    if parameter.minimum is not None:
        text += f", >= {parameter.minimum:g}"
    if parameter.maximum is not None:
        text += f", <= {parameter.maximum:g}"
    return text + (", or null" if parameter.nullable else "")


def _default(value: object) -> str:
    """A default as a scenario file would write it: YAML's ``true``, a bare string; none when unset."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f"`{value}`"


def _markdown(text: str) -> str:
    """Docstrings use reST's double backticks; Markdown wants single ones."""
    return text.replace("``", "`")


def _cell(text: str) -> str:
    return _markdown(text).replace("|", "\\|")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rewrite the fault reference of docs/faults.md.")
    parser.add_argument("--check", action="store_true", help="only say whether it is current (exit 1 if not)")
    args = parser.parse_args(argv)
    source = PAGE.read_text(encoding="utf-8")
    current = page(source)
    if current == source:
        return 0
    if args.check:
        print(f"docs/{PAGE.name}: the fault reference is out of date; run python docs/gen_faults.py")
        return 1
    PAGE.write_text(current, encoding="utf-8")
    print(f"docs/{PAGE.name}: fault reference rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
