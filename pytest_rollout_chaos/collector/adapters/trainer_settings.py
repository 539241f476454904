"""What an adapter gives upstream: every setting, its value and why it has that value.

An adapter changes no upstream setting of its own accord. Each setting it hands the trainer (a
config key, an argument, an attribute its stand-in for upstream's constructor sets) is taken
through one ``TrainerSettings`` and is one of:

- ``upstream default``: the value upstream itself uses when nobody sets it (``where`` names the
  place in the trainer's code); given explicitly only because the adapter stands in for the code
  that would have set it;
- ``run``: a setting upstream has no default for (a required key), fixed by this run: the model
  the policy serves, its context length, the rows asked for, the harness's limits;
- ``variant``: set by the adapter's name (``skyrl_skip_failed_rollouts``);
- ``scenario``: asked for by the scenario's ``workload.trainer_config``.

A scenario names a setting as ``TRAINER.dotted.key`` (``nemo_rl.policy.generation.vllm_cfg.
async_engine``); an adapter reads only its own trainer's keys, and a key of its trainer that it
does not hand upstream is a ``CollectorTargetError`` naming the keys it does (``check``). The
settings of one collection are recorded in the History as one ``trainer_settings`` event, which
the reports show.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.targets import TRAINERS

EVENT: Final = "trainer_settings"
SOURCE: Final = "collector"
Source = Literal["upstream default", "run", "variant", "scenario"]
SOURCES: Final = ("upstream default", "run", "variant", "scenario")


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting handed to upstream: its key, value, why it has that value, and upstream's own default."""

    key: str
    value: Any
    source: Source
    where: str = ""  # where upstream's default lives, or why the run fixes the value

    def to_data(self) -> dict[str, Any]:
        return {"key": self.key, "value": _plain(self.value), "source": self.source, "where": self.where}


class TrainerSettings:
    """The settings one adapter gives ``trainer`` in one collection, taken key by key.

    ``config`` is the scenario's ``trainer_config`` (every trainer's keys); ``known`` the keys this
    adapter hands upstream in any mode, for ``check``.
    """

    def __init__(self, trainer: str, config: Mapping[str, Any], known: Iterable[str] = ()) -> None:
        if trainer not in TRAINERS:
            raise ValueError(f"unknown trainer {trainer!r} (valid: {', '.join(TRAINERS)})")
        self.trainer = trainer
        prefix = f"{trainer}."
        self.asked: dict[str, Any] = {
            key.removeprefix(prefix): value for key, value in config.items() if key.startswith(prefix)
        }
        self.known = tuple(known)
        self.items: list[Setting] = []

    def check(self) -> None:
        """Every key the scenario asks of this trainer must be one this adapter hands upstream."""
        unknown = sorted(key for key in self.asked if key not in self.known)
        if unknown:
            shown = ", ".join(f"{self.trainer}.{key}" for key in unknown)
            valid = ", ".join(f"{self.trainer}.{key}" for key in self.known) or "none"
            raise CollectorTargetError(
                f"workload.trainer_config: the {self.trainer} adapter hands upstream no setting {shown} "
                f"(valid: {valid})"
            )

    def default(self, key: str, value: Any, where: str) -> Any:
        """Upstream's own default ``value`` (found at ``where``), unless the scenario asks otherwise."""
        return self._take(key, value, "upstream default", where)

    def run(self, key: str, value: Any, why: str) -> Any:
        """A setting upstream has no default for, fixed by this run (``why``), unless the scenario asks."""
        return self._take(key, value, "run", why)

    def variant(self, key: str, value: Any, why: str) -> Any:
        """A setting the adapter variant's name asks for."""
        return self._take(key, value, "variant", why)

    def _take(self, key: str, value: Any, source: Source, where: str) -> Any:
        if key in self.asked:
            value, source = self.asked[key], "scenario"
        self.items = [item for item in self.items if item.key != key]
        self.items.append(Setting(key, value, source, where))
        return value

    def record(self, history: History, **facts: Any) -> None:
        """One ``trainer_settings`` event holding every setting taken so far (and ``facts``: the mode...)."""
        history.append(
            SOURCE,
            "info",
            EVENT,
            {"trainer": self.trainer, **facts, "settings": [item.to_data() for item in self.items]},
        )


def nested(settings: Iterable[Setting], root: str) -> dict[str, Any]:
    """The settings under ``root`` (``policy.generation``) as the nested dict upstream reads."""
    out: dict[str, Any] = {}
    prefix = f"{root}." if root else ""
    for item in settings:
        if not item.key.startswith(prefix):
            continue
        *parents, leaf = item.key.removeprefix(prefix).split(".")
        place = out
        for part in parents:
            place = place.setdefault(part, {})
        place[leaf] = item.value
    return out


def recorded(history: History) -> list[dict[str, Any]]:
    """Every ``trainer_settings`` event's data in ``history``, in order."""
    return [dict(event.data) for event in history.events(source=SOURCE, kind="info", op=EVENT)]


def section(history: History) -> list[str]:
    """Every recorded event of ``history`` as a story tells it: a header naming the trainer (with
    the event's mode and variant), one indented line per setting, then a blank line."""
    lines = []
    for entry in recorded(history):
        facts = ", ".join(f"{key} {entry[key]}" for key in ("mode", "variant") if entry.get(key))
        lines.append(f"settings given to {entry.get('trainer')}{f' ({facts})' if facts else ''}:")
        lines += [f"  {line}" for line in describe(entry)]
        lines.append("")
    return lines


def describe(data: Mapping[str, Any]) -> list[str]:
    """One line per setting of a recorded event: ``nemo_rl: key = value (source: where)``."""
    lines = []
    for item in data.get("settings") or ():
        where = f": {item['where']}" if item.get("where") else ""
        lines.append(f"{data.get('trainer')}: {item['key']} = {item['value']!r} ({item['source']}{where})")
    return lines


def _plain(value: Any) -> Any:
    """A JSON-able form of a setting's value (a path, a tuple...)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return str(value)
