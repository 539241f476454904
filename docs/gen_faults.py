"""The fault reference page, written from the fault registry at every docs build.

``docs/faults.md`` holds the hand-written part (how faults reach the servers) and one marker
line, ``FAULTS_MARKER``; this MkDocs hook (``hooks:`` in ``mkdocs.yml``) replaces the marker with
one section per registered fault kind: its family, what it does (its module's and its class's
docstrings), its valid targets, what it needs to act and its parameters with types, bounds,
defaults and meaning, all read from the fault class itself (``family``, ``targets``, ``needs``). No
copy of the reference is kept in the repository, so the page cannot disagree with the registry;
``tests/docs/test_faults_page.py`` checks that every kind and every parameter appears.

Run it alone to print the generated part: ``python docs/gen_faults.py``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from typing import Any, Final

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.scenario import vocabulary

FAULTS_MARKER: Final = "<!-- generated: fault reference -->"
PAGE: Final = "faults.md"
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


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """MkDocs hook: fill the marker of the faults page; every other page is left as it is."""
    if page.file.src_uri != PAGE:
        return markdown
    if FAULTS_MARKER not in markdown:
        raise ValueError(f"docs/{PAGE}: the marker line {FAULTS_MARKER!r} is missing")
    return markdown.replace(FAULTS_MARKER, render())


if __name__ == "__main__":
    sys.stdout.write(render())
