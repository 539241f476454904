"""The docs say what the code does: pages that list registered things are checked against the registries.

The fault reference is generated at build time (``docs/gen_faults.py``), so here it is held
against the registry kind by kind and parameter by parameter; the invariants page, the README's
option table and the site's navigation are hand-written, so they are held against the invariant
registry, the plugin's option table and the files in ``docs/``. ``mkdocs build --strict`` (CI)
checks every link and every included file.
"""

from __future__ import annotations

import importlib.util
import re
import types
from pathlib import Path

import pytest
import yaml

from pytest_rollout_chaos import plugin, settings
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.invariants import registry as invariant_registry
from pytest_rollout_chaos.invariants import witnesses

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def load_generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gen_faults", DOCS / "gen_faults.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented_parameters(markdown: str) -> dict[str, list[str]]:
    """``{kind: [parameter, ...]}`` as the generated page lists them, in order."""
    found: dict[str, list[str]] = {}
    kind = None
    for line in markdown.splitlines():
        if heading := re.fullmatch(r"### `(\w+)`", line):
            kind = heading[1]
            found[kind] = []
        elif kind is not None and (row := re.match(r"\| `(\w+)` \|", line)):
            found[kind].append(row[1])
    return found


def test_the_fault_reference_lists_every_registered_kind_with_its_parameters() -> None:
    page = load_generator().render()
    expected = {
        kind: [parameter.name for parameter in registry.parameters(kind) if parameter.name != "target"]
        for kind in (cls.kind for cls in registry.FAULT_TYPES)
    }
    assert documented_parameters(page) == expected


def test_the_fault_reference_says_what_each_fault_needs_from_its_class() -> None:
    page = load_generator().render()
    for cls in registry.FAULT_TYPES:
        section = page.split(f"### `{cls.kind}`\n", 1)[1].split("\n### ", 1)[0]
        needs = re.search(r"^\*\*Needs:\*\* (.+)$", section, flags=re.MULTILINE)
        assert needs is not None, cls.kind
        assert needs[1] == "; ".join(need.value for need in cls.needs), cls.kind


def test_the_faults_page_gets_the_generated_reference_at_its_marker() -> None:
    generator = load_generator()
    source = (DOCS / "faults.md").read_text(encoding="utf-8")
    assert source.count(generator.FAULTS_MARKER) == 1
    faults_page = types.SimpleNamespace(file=types.SimpleNamespace(src_uri="faults.md"))
    built = generator.on_page_markdown(source, page=faults_page)
    assert generator.FAULTS_MARKER not in built
    assert generator.render() in built
    other_page = types.SimpleNamespace(file=types.SimpleNamespace(src_uri="index.md"))
    assert generator.on_page_markdown(source, page=other_page) == source


def test_the_faults_page_without_its_marker_fails_the_build() -> None:
    faults_page = types.SimpleNamespace(file=types.SimpleNamespace(src_uri="faults.md"))
    with pytest.raises(ValueError, match=r"marker line .* is missing"):
        load_generator().on_page_markdown("# Faults\n", page=faults_page)


def test_the_invariants_page_has_one_section_per_registered_invariant() -> None:
    page = (DOCS / "invariants.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## `(\w+)`$", page, flags=re.MULTILINE)
    assert sections == list(invariant_registry.NAMES)


def test_the_invariants_page_and_the_format_reference_list_every_witness_and_the_standing_ones() -> None:
    for page in (DOCS / "invariants.md", ROOT / "scenarios" / "README.md"):
        text = page.read_text(encoding="utf-8")
        rows = re.findall(r"^\| `(\w+)` \|", text, flags=re.MULTILINE)
        assert [name for name in rows if name in witnesses.NAMES] == list(witnesses.NAMES), page
        standing = ", ".join(f"`{name}`" for name in invariant_registry.STANDING)
        assert standing in " ".join(text.split()), page


def readme_option_rows() -> list[str]:
    return [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("| `--")]


def test_the_readme_option_table_is_the_plugins_option_table() -> None:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    expected = [
        f"| `--rollout-chaos` | `{settings.OPT_ENABLED}` | Enable rollout chaos: collect `*.chaos.yaml` "
        "files and allow the chaos fixtures |"
    ]
    expected += [
        f"| `--{dest.replace('_', '-')}={cell(metavar)}` | `{dest}` | {cell(help_text)} |"
        for dest, metavar, help_text in plugin._OPTIONS
    ]
    assert readme_option_rows() == expected
    readme = README.read_text(encoding="utf-8")
    for ini_only in (plugin.CATALOG_INI, settings.INI_POLICY_READY_TIMEOUT):
        assert f"| (ini only) | `{ini_only}` |" in readme


def test_the_readme_and_the_architecture_stay_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) < 250
    assert len((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines()) < 250


def test_the_readme_links_to_files_that_exist() -> None:
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    assert targets
    assert [target for target in targets if not (ROOT / target).exists()] == []


def test_every_docs_page_is_in_the_navigation() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = sorted(page for entry in config["nav"] for page in entry.values())
    assert in_nav == sorted(path.name for path in DOCS.glob("*.md"))
