"""The optional extras: which import each needs, and the error that names the extra to install.

The core installs without them (``pip install pytest-rollout-chaos``); the parts that use one
import it lazily and, where it is missing, raise ``MissingExtraError`` saying what needed it and
the ``pip install`` line, instead of a bare ``ModuleNotFoundError`` from deep inside a fixture.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Final

PROJECT: Final = "pytest-rollout-chaos"


@dataclass(frozen=True, slots=True)
class Extra:
    """One optional extra of ``pyproject.toml``: its name, the distribution and the module it brings."""

    name: str
    distribution: str
    module: str

    @property
    def install(self) -> str:
        return f"pip install '{PROJECT}[{self.name}]'"


FUZZ: Final = Extra("fuzz", "hypothesis", "hypothesis")
DOCKER: Final = Extra("docker", "docker", "docker")
TOXIPROXY: Final = Extra("toxiproxy", "toxiproxy-python", "toxiproxy")


class MissingExtraError(ImportError):
    """An optional part was used without its extra installed; the message says which to install."""

    def __init__(self, extra: Extra, needed_by: str) -> None:
        super().__init__(
            f"{needed_by} needs {extra.distribution} (import {extra.module!r}), which is not installed: "
            f"{extra.install}",
            name=extra.module,
        )
        self.extra = extra


def installed(extra: Extra) -> bool:
    """Whether ``extra``'s module can be imported here, without importing it."""
    return importlib.util.find_spec(extra.module) is not None


def require(extra: Extra, needed_by: str) -> None:
    """Raise ``MissingExtraError`` unless ``extra``'s module can be imported here."""
    if not installed(extra):
        raise MissingExtraError(extra, needed_by)
