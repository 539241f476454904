"""Run under the NeMo Gym interpreter: real ``RolloutCollectionHelper.run_examples`` over rows, as the
``nemo_gym`` target runs it (``collect`` of ``servers/nemo_gym/rollouts.py``, loaded by path), then
validate every ``/run`` result with NeMo Gym's own pydantic models.

Input (stdin, JSON): ``{"program": rollouts.py's path, "head": {"host", "port"}, "rows": [...],
"timeout_s": float}``. Output (stdout, last line, JSON): ``{"results": [{"row", "result"}],
"invalid": [str], "failed": [str]}``; ``failed`` holds what ended the collection, if anything did.
Imports nothing from the project's package: it runs where only ``nemo_gym`` is installed.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import sys
from typing import Any


def _validate(result: dict[str, Any], models: dict[str, Any]) -> list[str]:
    problems = []
    for name, model in models.items():
        value = result["response"] if name == "NeMoGymResponse" else result
        try:
            model.model_validate(value)
        except Exception as error:  # pydantic.ValidationError; anything else is a finding too
            problems.append(f"row {result.get('_rowidx')}: {name}: {error}")
    return problems


def _rollouts(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("rollouts", path)
    assert spec is not None, path
    assert spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _collect(request: dict[str, Any]) -> dict[str, Any]:
    rollouts = _rollouts(request["program"])
    models = {
        "BaseVerifyResponse": importlib.import_module("nemo_gym.base_resources_server").BaseVerifyResponse,
        "SimpleAgentVerifyResponse": importlib.import_module(
            "responses_api_agents.simple_agent.app"
        ).SimpleAgentVerifyResponse,
        "NeMoGymResponse": importlib.import_module("nemo_gym.openai_utils").NeMoGymResponse,
    }
    rows = request["rows"]
    results: list[dict[str, Any]] = []
    invalid: list[str] = []
    failed: list[str] = []
    try:
        async with asyncio.timeout(request["timeout_s"]):
            async for position, result in rollouts.collect(request["head"], rows):
                results.append({"row": rows[position], "result": result})
                invalid += _validate(result, models)
    except Exception as error:
        failed.append(f"{type(error).__name__}: {error}")
    return {"results": results, "invalid": invalid, "failed": failed}


def main() -> None:
    request = json.load(sys.stdin)
    answer = asyncio.run(_collect(request))
    sys.stdout.write("\n" + json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
