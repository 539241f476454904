"""The ``vllm serve`` flags: the harness's own, its defaults, and the user's (``--rollout-chaos-vllm-args``).

The command line is ``vllm serve MODEL`` then the flags the harness needs (``REQUIRED``: where
it listens, the name it serves, the seed, the logprobs limit), then the defaults the user did
not give, then the user's flags as written. A default the user names is dropped rather than
overridden by position, so a switch (``--enforce-eager``) can be turned off with its ``--no-``
form and the command line holds one value per option. A user flag the harness needs is an
error naming it and why: the proxies, probes and collectors rely on it.

Options are matched the way vLLM's parser reads them: ``--max_model_len`` is
``--max-model-len``, ``--opt=value`` is ``--opt value``, ``--no-opt`` turns ``--opt`` off, and
the short aliases in ``SHORT`` stand for their long names.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

OPTION: Final = "--rollout-chaos-vllm-args"
# vLLM's own default, and the tiny policy's limit (``protocol.MAX_LOGPROBS``; not imported: that
# module brings aiohttp, and this one is read when the options are).
MAX_LOGPROBS: Final = 20
# option -> why the harness must be the one to set it (or, for the last two, leave it unset)
REQUIRED: Final[Mapping[str, str]] = {
    "model": "the model is --rollout-chaos-model (a directory, or a Hugging Face id in the local cache)",
    "host": "the harness binds the server to loopback, where its proxies reach it",
    "port": "the harness picks a free port and points its proxies and probes at it",
    "served-model-name": "the Gym servers and collectors ask for the model by the name the harness serves",
    "seed": "the run's seed is --rollout-chaos-seed",
    "max-logprobs": (
        f"the harness serves up to {MAX_LOGPROBS} top logprobs, as the tiny policy does, so collectors "
        "see the same limits on either backend"
    ),
    "api-key": "the harness's probes, proxies and collectors send no key",
    "uds": "the harness reaches the server over TCP on its port, not a unix socket",
}
# vLLM's short aliases (its FlexibleArgumentParser) for options whose meaning the harness reads
SHORT: Final[Mapping[str, str]] = {
    "-tp": "tensor-parallel-size",
    "-pp": "pipeline-parallel-size",
    "-dp": "data-parallel-size",
    "-q": "quantization",
    "-O": "compilation-config",
}
PARALLEL: Final = ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size")
_NUMBER: Final = re.compile(r"^-\d")


@dataclass(frozen=True, slots=True)
class Flag:
    """One option as written: its canonical name (``max-model-len``) and its tokens."""

    name: str
    tokens: tuple[str, ...]
    negated: bool = False  # written as --no-NAME

    @property
    def value(self) -> str | None:
        """Its value (``--x=v`` or ``--x v``); None for a switch."""
        head = self.tokens[0]
        if "=" in head:
            return head.partition("=")[2]
        return self.tokens[1] if len(self.tokens) > 1 else None


def split(text: str) -> tuple[str, ...]:
    """Shell-split ``text`` (``ValueError`` on unbalanced quotes)."""
    return tuple(shlex.split(text))


def parse(args: Sequence[str]) -> list[Flag]:
    """``args`` as options with their values; ``ValueError`` for a positional argument."""
    flags: list[Flag] = []
    for token in args:
        if token.startswith("-") and not _NUMBER.match(token) and token != "-":
            name, negated = _canonical(token.partition("=")[0])
            flags.append(Flag(name, (token,), negated))
        elif flags and "=" not in flags[-1].tokens[0]:
            last = flags[-1]
            flags[-1] = Flag(last.name, (*last.tokens, token), last.negated)
        else:
            raise ValueError(
                f"{token!r} is not an option: vllm serve takes the model as its only positional "
                "argument, and that is --rollout-chaos-model"
            )
    return flags


def _canonical(option: str) -> tuple[str, bool]:
    if option in SHORT:
        return SHORT[option], False
    name = option.lstrip("-").replace("_", "-")
    if name.startswith("no-"):
        return name.removeprefix("no-"), True
    return name, False


def reserved_problem(
    user_args: Sequence[str], required: Iterable[str] = REQUIRED, *, source: str = OPTION
) -> str | None:
    """Why ``user_args`` cannot be passed (a flag the harness needs, a positional), or None;
    ``source`` names where they came from (the option or its ini twin)."""
    try:
        flags = parse(user_args)
    except ValueError as error:
        return f"{source}: {error}"
    needed = set(required)
    for flag in flags:
        if flag.name in needed:
            why = REQUIRED.get(flag.name, "the harness sets it itself")
            return (
                f"{source}: {flag.tokens[0]} cannot be given there: {why} "
                f"(the harness sets: {', '.join('--' + name for name in sorted(needed))})"
            )
    return None


def merge(required: Sequence[str], defaults: Sequence[str], user: Sequence[str]) -> list[str]:
    """``required``, then each default the user does not name, then ``user`` as written.

    ``ValueError`` when ``user`` names a flag of ``required`` (see ``reserved_problem``).
    """
    names = {flag.name for flag in parse(required)}
    problem = reserved_problem(user, names | set(REQUIRED))
    if problem is not None:
        raise ValueError(problem)
    given = {flag.name for flag in parse(user)}
    kept = [token for flag in parse(defaults) if flag.name not in given for token in flag.tokens]
    return [*required, *kept, *user]


def last_value(args: Sequence[str], name: str) -> str | None:
    """The value the last ``--name`` in ``args`` gives (as vLLM's parser keeps the last), or None."""
    values = [flag.value for flag in parse(args) if flag.name == name and not flag.negated]
    return values[-1] if values else None


def parallel_size(args: Sequence[str]) -> int:
    """How many devices the engine spreads over: tensor x pipeline x data parallel sizes (1 each
    by default). ``ValueError`` names a size that is not a whole number >= 1."""
    total = 1
    for name in PARALLEL:
        text = last_value(args, name)
        if text is None:
            continue
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{OPTION}: --{name} {text!r} is not a whole number >= 1")
        total *= int(text)
    return total
