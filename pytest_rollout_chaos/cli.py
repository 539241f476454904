"""The ``rollout-chaos`` command: validate, list, create and describe scenario files, serve the
embedded Toxiproxy-compatible server on its own, gate a trainer's PR (``gate``) and run scenarios
without pytest (``run``).

Exit status: 0 when everything is fine (``toxiproxy``: stopped by SIGINT or SIGTERM), 1 when a
file has problems (one ``path:line`` line per problem), ``new`` would overwrite a file or
``toxiproxy`` cannot listen, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.scenario import vocabulary
from pytest_rollout_chaos.scenario.model import (
    SUFFIX,
    Scenario,
    ScenarioFileError,
    load_scenario,
    scenario_files,
)

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1
DESCRIPTION: Final = (
    "Check and create rollout-chaos scenario files (*.chaos.yaml) without running them; "
    "serve the embedded Toxiproxy."
)
TOXIPROXY_DESCRIPTION: Final = (
    "Run the embedded Toxiproxy-compatible server (Toxiproxy 2.x REST API and toxics) in the "
    "foreground, for toxiproxy-python, toxiproxy-cli or curl, without pytest. It prints the URL it "
    "listens on; Ctrl-C (SIGINT) or SIGTERM stops it."
)
VALIDATE_DESCRIPTION: Final = (
    "Check scenario files (*.chaos.yaml, or folders searched for them) without running anything. "
    "Every problem of a file is printed at once, one 'path:line: field: what is wrong (valid: ...)' "
    "line each; the exit status is 1 when any file has a problem."
)
LIST_DESCRIPTION: Final = (
    "List the built-in catalog (the names --rollout-chaos-scenario takes) and the scenarios in each "
    "FOLDER: name, tags and description, wrapped to the terminal's width."
)
NEW_DESCRIPTION: Final = (
    "Write NAME.chaos.yaml, a commented starting file that validates, for a scenario of your own; "
    "an existing file is never overwritten."
)
SCHEMA_DESCRIPTION: Final = (
    "Print the JSON Schema of the scenario format, for an editor that completes and checks "
    "*.chaos.yaml files (such as yaml-language-server)."
)
EPILOG: Final = "Run scenarios with: pytest --rollout-chaos [FILES or folders], or rollout-chaos run"
NARROWEST_DESCRIPTION: Final = 30  # columns; narrower, a scenario's description goes under its name


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        status: int = args.handler(args, sys.stdout, sys.stderr)
    except BrokenPipeError:
        # The reader (``| head``) stopped early: not an error; keep Python quiet at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return status


def _parser() -> argparse.ArgumentParser:
    from pytest_rollout_chaos.version import __version__

    parser = argparse.ArgumentParser(prog="rollout-chaos", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    validate = commands.add_parser(
        "validate",
        help="Check scenario files; print one path:line line per problem",
        description=VALIDATE_DESCRIPTION,
    )
    validate.add_argument("paths", nargs="+", type=Path, metavar="FILE", help="Files, or folders to search")
    validate.add_argument(
        "--policy-replicas",
        type=_replica_count,
        default=1,
        metavar="N",
        help="Policy replicas the run starts (--rollout-chaos-policy-replicas), which policy[i] targets "
        "are checked against where a file does not ask for its own (default: 1)",
    )
    validate.set_defaults(handler=_validate)

    listing = commands.add_parser(
        "list", help="List the built-in catalog and the scenarios in FOLDERs", description=LIST_DESCRIPTION
    )
    listing.add_argument("folders", nargs="*", type=Path, metavar="FOLDER", help="More folders to list")
    listing.add_argument("--no-builtin", action="store_true", help="Leave out the built-in catalog")
    listing.set_defaults(handler=_list)

    new = commands.add_parser(
        "new", help="Write NAME.chaos.yaml, a commented starting file", description=NEW_DESCRIPTION
    )
    new.add_argument("name", metavar="NAME", help="Scenario name: lowercase letters, digits, - and _")
    new.add_argument("--dir", type=Path, default=Path(), help="Folder to write into (default: current)")
    new.set_defaults(handler=_new)

    schema = commands.add_parser(
        "schema", help="Print the JSON Schema of the scenario format", description=SCHEMA_DESCRIPTION
    )
    schema.set_defaults(handler=_schema)

    proxy = commands.add_parser(
        "toxiproxy",
        help="Run the embedded Toxiproxy-compatible server in the foreground",
        description=TOXIPROXY_DESCRIPTION,
    )
    proxy.add_argument("--host", default="127.0.0.1", help="API host (default: 127.0.0.1)")
    proxy.add_argument(
        "--port", type=_port, default=8474, help="API port; 0 lets the OS choose (default: 8474, Toxiproxy's)"
    )
    proxy.add_argument("--config", metavar="FILE", default="", help="JSON list of proxies to create at start")
    proxy.add_argument("--seed", type=int, default=None, help="Seed for jitter, slicing and toxicity")
    proxy.set_defaults(handler=_toxiproxy)

    from pytest_rollout_chaos.gate import command as gate_command

    gate = commands.add_parser(
        "gate",
        help="Compare the catalog on a trainer's base and head trees (a PR gate)",
        description=gate_command.DESCRIPTION,
    )
    gate_command.add_arguments(gate)
    gate.set_defaults(handler=gate_command.run)

    from pytest_rollout_chaos import run_command

    running = commands.add_parser(
        "run", help="Run scenarios on the real stack without pytest", description=run_command.DESCRIPTION
    )
    run_command.add_arguments(running)
    running.set_defaults(handler=run_command.run_command)
    return parser


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {text!r} (valid: 0 to 65535)")
    return port


def _replica_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"invalid value {text!r} (valid: a whole number >= 1)")
    return int(text)


def _validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    files = scenario_files(args.paths)
    invalid = 0
    for path in files:
        try:
            load_scenario(path, policy_replicas=args.policy_replicas)
        except ScenarioFileError as exc:
            invalid += 1
            for problem in exc.problems:
                print(problem, file=out)
    for folder in args.paths:
        if folder.is_dir() and not any(folder.rglob(f"*{SUFFIX}")):
            invalid += 1
            print(f"{folder}: no *{SUFFIX} files in this folder", file=out)
    print(f"{len(files)} file(s) checked, {invalid} with problems", file=err)
    return EXIT_PROBLEMS if invalid else EXIT_OK


def _list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    folders: list[Path] = [] if args.no_builtin else [bundled.catalog_dir()]
    folders += args.folders
    status = EXIT_OK
    for folder in folders:
        scenarios: list[Scenario] = []
        for path in scenario_files([folder]):
            try:
                scenarios.append(load_scenario(path))
            except ScenarioFileError as exc:
                status = EXIT_PROBLEMS
                print(f"{path}: {len(exc.problems)} problem(s); see rollout-chaos validate {path}", file=err)
        print(f"{folder} ({len(scenarios)} scenario(s))", file=out)
        print(_table(scenarios), file=out)
    return status


def _table(scenarios: Sequence[Scenario], width: int | None = None) -> str:
    """Name, tags and description per scenario, the description wrapped to ``width`` columns (the
    terminal's, or ``COLUMNS``); too narrow for a column of its own, it goes under the name."""
    if not scenarios:
        return "  (none)"
    width = width or shutil.get_terminal_size().columns
    rows = [(s.name, ",".join(s.tags) or "-", s.summary) for s in sorted(scenarios, key=lambda s: s.name)]
    name_width = max(len(row[0]) for row in rows)
    tags_width = max(len(row[1]) for row in rows)
    indent = 2 + name_width + 2 + tags_width + 2
    lines = []
    for name, tags, text in rows:
        head = f"  {name:<{name_width}}  {tags:<{tags_width}}  "
        if width - indent >= NARROWEST_DESCRIPTION:
            wrapped = _wrap(text, width - indent) or [""]
            lines.append(head + wrapped[0])
            lines += [" " * indent + line for line in wrapped[1:]]
        else:
            lines.append(head.rstrip())
            lines += [" " * 6 + line for line in _wrap(text, max(width, NARROWEST_DESCRIPTION) - 6)]
    return "\n".join(lines)


def _wrap(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` columns, never splitting a word or a hyphenated name."""
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


def _new(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pytest_rollout_chaos.scenario.template import render

    name: str = args.name
    if re.fullmatch(vocabulary.NAME_PATTERN, name) is None:
        print(
            f"rollout-chaos new: invalid name {name!r} (valid: lowercase letters, digits, - and _)", file=err
        )
        return EXIT_PROBLEMS
    target = args.dir / f"{name}{SUFFIX}"
    try:
        with target.open("x", encoding="utf-8") as handle:
            handle.write(render(name))
    except FileExistsError:
        print(f"rollout-chaos new: {target} exists; not overwriting it", file=err)
        return EXIT_PROBLEMS
    except OSError as exc:
        print(f"rollout-chaos new: cannot write {target}: {exc}", file=err)
        return EXIT_PROBLEMS
    print(target, file=out)
    return EXIT_OK


def _schema(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pytest_rollout_chaos.scenario.schema import scenario_schema

    print(json.dumps(scenario_schema(), indent=2), file=out)
    return EXIT_OK


def _toxiproxy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pytest_rollout_chaos.servers.toxiproxy.__main__ import main as serve_toxiproxy

    argv = ["-host", args.host, "-port", str(args.port)]
    argv += ["-config", args.config] if args.config else []
    argv += ["-seed", str(args.seed)] if args.seed is not None else []
    try:
        serve_toxiproxy(argv)
    except OSError as error:
        print(
            f"rollout-chaos toxiproxy: cannot listen on {args.host}:{args.port}: {error} "
            "(pass another --port, or --port 0 to let the OS choose)",
            file=err,
        )
        return EXIT_PROBLEMS
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
