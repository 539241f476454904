"""The docs say what the code does: pages that list registered things are checked against the registries.

The fault reference is written from the registry (``docs/gen_faults.py``) and kept in the
repository, so here it is held against the registry kind by kind and parameter by parameter and
must be current; the invariants page, the README's option table and the site's navigation are
hand-written, so they are held against the invariant registry, the plugin's option table and the
files in ``docs/``. The site builds with MkDocs alone, the package and its runtime unimportable;
``mkdocs build --strict`` (CI) checks every link and every included file.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
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


def test_the_faults_page_holds_the_reference_the_registry_gives() -> None:
    generator = load_generator()
    source = (DOCS / "faults.md").read_text(encoding="utf-8")
    assert source.count(generator.FAULTS_MARKER) == 1
    assert generator.render() in source
    assert generator.page(source) == source, (
        "the fault reference is out of date: run python docs/gen_faults.py"
    )


def test_the_faults_page_without_its_marker_is_refused() -> None:
    with pytest.raises(ValueError, match=r"marker line .* is missing"):
        load_generator().page("# Faults\n")


def test_the_site_builds_with_mkdocs_alone(tmp_path: Path) -> None:
    """``mkdocs build --strict`` with the package, aiohttp and torch unimportable: the ``[docs]``
    extra's MkDocs and theme are all the site needs."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    for name in ("pytest_rollout_chaos", "aiohttp", "torch"):
        (tmp_path / "hidden" / name).mkdir(parents=True)
        (tmp_path / "hidden" / name / "__init__.py").write_text(f"raise ImportError('{name} is hidden')\n")
    build = subprocess.run(
        # -P: the checkout, the current folder, is not put on sys.path
        [sys.executable, "-P", "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "hidden"), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-4000:]
    assert (tmp_path / "site" / "faults" / "index.html").is_file()


def test_the_docs_name_what_the_site_needs_as_the_docs_extra_does() -> None:
    with (ROOT / "pyproject.toml").open("rb") as file:
        needed = tomllib.load(file)["project"]["optional-dependencies"]["docs"]
    running = " ".join((DOCS / "running.md").read_text(encoding="utf-8").split())
    assert f"pip install {' '.join(repr(requirement) for requirement in needed)} && mkdocs build" in running


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
