"""The "Writing a collector" page as the tests read it: its headings and its minimal collector."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

PAGE: Final = Path(__file__).parents[2] / "docs" / "writing-a-collector.md"
MINIMAL: Final = "A minimal collector"
_FENCE: Final = re.compile(r"^```python\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)


def text() -> str:
    return PAGE.read_text(encoding="utf-8")


def headings(level: int = 2) -> list[str]:
    """The page's headings of ``level`` (``## Title`` is 2), in order."""
    marks = "#" * level
    return [line[level + 1 :] for line in text().splitlines() if line.startswith(f"{marks} ")]


def section(title: str) -> str:
    """The text under ``## title`` up to the next heading of that level."""
    page = text()
    start = page.index(f"\n## {title}\n")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else len(page)]


def minimal_collector() -> str:
    """The source of ``chaos.py`` as the page shows it: the section's first Python block."""
    found = _FENCE.search(section(MINIMAL))
    if found is None:
        raise AssertionError(f"{PAGE.name}: no ```python block under '## {MINIMAL}'")
    return found["code"]
