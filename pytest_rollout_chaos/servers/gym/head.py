"""The Gym head server: where a NeMo Gym client learns every server's address.

``GET /global_config_dict_yaml`` answers the global config as YAML text inside a JSON string
(clients ``json.loads`` it, then parse the YAML), as NeMo Gym's head server does; a real
``RolloutCollectionHelper`` finds our agents from it, and each time one asks, the head records
it (``head info global_config_dict_yaml`` with the asker's ``User-Agent``: NeMo Gym's client asks
with ``requests`` at every ``run_examples``). ``GET /server_instances`` lists the instances. The
config is built by ``stack.py`` and passed as a JSON file.

Run as ``python -m pytest_rollout_chaos.servers.gym.head --config-file PATH``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import yaml
from aiohttp import web

from pytest_rollout_chaos.history import EventWriter
from pytest_rollout_chaos.servers import serve
from pytest_rollout_chaos.servers.gym.base import gym_app

SERVER_TYPES: Final = ("responses_api_agents", "responses_api_models", "resources_servers")


@dataclass(slots=True)
class HeadState:
    """The served global config (the head server fills in its own port once bound)."""

    config: dict[str, Any]


STATE_KEY: Final = web.AppKey("head_state", HeadState)
WRITER_KEY: Final = web.AppKey("head_events", EventWriter)


def global_config(
    *,
    agents: Mapping[str, tuple[str, str, str]],
    model: tuple[str, str],
    resources: tuple[str, str],
) -> dict[str, Any]:
    """NeMo Gym's global config dict for our stack.

    ``agents`` maps instance name to (URL, resources instance, model instance); ``model`` and
    ``resources`` are (instance name, URL). URLs are what clients should use (proxy addresses).
    """
    config: dict[str, Any] = {
        "head_server": {"host": "127.0.0.1", "port": 0},  # the head server fills in its own port
        "default_host": "127.0.0.1",
        "policy_model_name": "policy",
    }
    model_name, model_url = model
    config[model_name] = {
        "responses_api_models": {
            "vllm_model": {
                "entrypoint": "app.py",
                "return_token_id_information": True,
                **_host_port(model_url),
            }
        }
    }
    resources_name, resources_url = resources
    config[resources_name] = {
        "resources_servers": {"rollout_chaos_tasks": {"entrypoint": "app.py", **_host_port(resources_url)}}
    }
    for name, (url, resources_instance, model_instance) in agents.items():
        config[name] = {
            "responses_api_agents": {
                "simple_agent": {
                    "entrypoint": "app.py",
                    **_host_port(url),
                    "resources_server": {"type": "resources_servers", "name": resources_instance},
                    "model_server": {"type": "responses_api_models", "name": model_instance},
                }
            }
        }
    return config


def server_instances(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per server instance (NeMo Gym's ``ServerInstanceDisplayConfig`` fields)."""
    instances = []
    for name, entry in config.items():
        if not isinstance(entry, Mapping):
            continue
        for server_type in SERVER_TYPES:
            for implementation, settings in (entry.get(server_type) or {}).items():
                instances.append(
                    {
                        "name": name,
                        "server_type": server_type,
                        "config_path": f"{server_type}/{implementation}",
                        "entrypoint": settings.get("entrypoint"),
                        "host": settings.get("host"),
                        "port": settings.get("port"),
                        "url": f"http://{settings.get('host')}:{settings.get('port')}",
                        "status": "success",
                    }
                )
    return instances


def _host_port(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"server URL {url!r} must have a host and a port, like http://127.0.0.1:8000")
    return {"host": parts.hostname, "port": parts.port}


def build_app(config: dict[str, Any]) -> web.Application:
    """The head server app serving ``config``."""
    app, writer = gym_app("head", "head")
    app[STATE_KEY] = HeadState(config)
    app[WRITER_KEY] = writer
    app.router.add_get("/global_config_dict_yaml", config_yaml)
    app.router.add_get("/server_instances", instances)
    return app


async def config_yaml(request: web.Request) -> web.Response:
    """The global config as YAML text, JSON-encoded (a JSON string); who asked is recorded."""
    writer = request.app[WRITER_KEY]
    writer.emit("info", "global_config_dict_yaml", {"user_agent": request.headers.get("User-Agent", "")})
    writer.flush()
    text = yaml.safe_dump(request.app[STATE_KEY].config, sort_keys=False)
    return web.json_response(text)


async def instances(request: web.Request) -> web.Response:
    return web.json_response(server_instances(request.app[STATE_KEY].config))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pytest_rollout_chaos.servers.gym.head")
    parser.add_argument("--config-file", type=Path, required=True, help="Global config dict as JSON")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        config = json.loads(args.config_file.read_text())
    except (OSError, ValueError) as error:
        parser.error(f"cannot read --config-file {str(args.config_file)!r}: {error}")
    if not isinstance(config, dict):
        parser.error(f"--config-file {str(args.config_file)!r} must hold a JSON object")
    app = build_app(config)

    async def record_own_address(host: str, port: int) -> None:
        config["head_server"] = {"host": host, "port": port}

    serve.serve(app, port=args.port, on_started=record_own_address)


if __name__ == "__main__":
    main()
