"""Child side: NeMo Gym's own rollout collection over the rows handed in, run in this process.

Runs under the NeMo Gym interpreter, as a script by path, so it imports nothing from this package
and runs on any Python NeMo Gym runs on (the ``nemo_gym`` target starts it; the cross-checks in
``tests/nemo_gym`` import ``collect`` from it by path). What runs is what ``ng_collect_rollouts``
runs for its rows: ``RolloutCollectionHelper().run_examples(rows, head_server_config=HEAD,
semaphore=...)`` with the semaphore ``run_from_config`` builds from ``num_samples_in_parallel``,
every awaitable awaited in completion order as ``run_from_config`` awaits them, so the first one
that raises ends the collection. Nothing is caught, retried or changed on the way: the rows go in
as given, each result comes out as ``run_examples`` gave it.

Protocol. stdin: one JSON object ``{"head": {"host", "port"}, "rows": [...],
"num_samples_in_parallel": int | null}``. Out, on the file descriptor that was stdout, one JSON
line each: ``{"row": i, "result": {...}}`` when the i-th row handed in came back;
``{"raised": {"type", "message", "where", "causes"}}`` when the collection raised (exit 1);
``{"done": n}`` when ``run_examples``' iterator ended after n results. Standard output is pointed
at stderr first, so nothing NeMo Gym prints can mix with them.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import traceback
from collections.abc import AsyncIterator
from typing import IO, Any

SITE: str = "site-packages" + os.sep


async def collect(
    head: dict[str, Any], rows: list[dict[str, Any]], num_samples_in_parallel: int | None = None
) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """``(position, result)`` for each row ``run_examples`` answers, in completion order; what it
    raises is raised. A row is known by identity: ``run_examples`` hands back the dict it was given
    (0.5 and later add routing keys to it in place)."""
    helper_module: Any = importlib.import_module("nemo_gym.rollout_collection")
    config_types: Any = importlib.import_module("nemo_gym.config_types")
    head_config = config_types.BaseServerConfig(host=head["host"], port=head["port"])
    semaphore = asyncio.Semaphore(num_samples_in_parallel) if num_samples_in_parallel else None
    positions = {id(row): position for position, row in enumerate(rows)}
    helper = helper_module.RolloutCollectionHelper()
    for future in helper.run_examples(rows, head_server_config=head_config, semaphore=semaphore):
        row, result = await future
        position = positions.get(id(row))
        if position is None:
            raise RuntimeError(
                "run_examples answered with a row it was not handed (a copy?); keys: "
                f"{sorted(row) if isinstance(row, dict) else type(row).__name__}"
            )
        yield position, result


def described(error: BaseException) -> dict[str, Any]:
    """The raise as data: its type, message, innermost frame, and the chain of its causes."""
    frames = traceback.extract_tb(error.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f"{last.filename.rpartition(SITE)[2] or last.filename}:{last.lineno} in {last.name}"
    causes = []
    seen = {id(error)}
    link = error.__cause__ or error.__context__
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        causes.append(f"{type(link).__name__}: {link}")
        link = link.__cause__ or link.__context__
    return {"type": type(error).__name__, "message": str(error), "where": where, "causes": causes}


async def _run(request: dict[str, Any], out: IO[str]) -> int:
    def write(line: dict[str, Any]) -> None:
        out.write(json.dumps(line) + "\n")
        out.flush()

    count = 0
    try:
        async for position, result in collect(
            request["head"], request["rows"], request.get("num_samples_in_parallel")
        ):
            write({"row": position, "result": result})
            count += 1
    except Exception as error:  # carried to the parent, which raises it as the collection's
        traceback.print_exc()
        write({"raised": described(error)})
        return 1
    write({"done": count})
    return 0


def main() -> None:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # NeMo Gym's prints go to stderr from here on
    request = json.load(sys.stdin)
    code = asyncio.run(_run(request, out))
    out.close()
    sys.exit(code)


if __name__ == "__main__":
    main()
