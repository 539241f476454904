"""NeMo Gym's resolved global config dict for the real servers, one view per process.

Each real server reads the whole config from ``NEMO_GYM_CONFIG_DICT`` and finds its own
instance by name; it reaches the others at the host and port the config gives them. So every
process gets its own view: its own instance at its real port, every peer at the address of
the proxy on the link between them (``addresses``). Nothing here starts anything.

The instances mirror the embedded stack: ``gym_model`` is ``vllm_model`` in token-id mode
(the ``vllm_model_for_training.yaml`` settings, without a reasoning parser, since the tiny
policy emits none), ``gym_resources`` is ``equivalence_rule`` with exact grading (needs no judge
model), and each agent instance is a ``simple_agent`` bound to both. Wheels that reach agents
through environment servers (0.5 and later) get one ``legacy_agent`` relay per agent, as their
``scripts/add_legacy_agent_environment_servers.py`` adds to an agent-only config.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

MODEL_DIR: Final = "responses_api_models/vllm_model"
AGENT_DIR: Final = "responses_api_agents/simple_agent"
RESOURCES_DIR: Final = "resources_servers/equivalence_rule"
RELAY_DIR: Final = "environment_servers/legacy_agent"
API_KEY: Final = "rollout-chaos"  # vllm_model sends it as a bearer token; the tiny policy ignores it


@dataclass(frozen=True, slots=True)
class Instance:
    """One server instance: its name, its directory in the wheel and its own settings."""

    name: str
    server_dir: str  # "<server type>/<implementation>", relative to site-packages
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def server_type(self) -> str:
        return self.server_dir.partition("/")[0]

    @property
    def implementation(self) -> str:
        return self.server_dir.partition("/")[2]


def model_instance(name: str, *, policy_base_url: str | Sequence[str], model: str) -> Instance:
    """``vllm_model`` in token-id mode against ``policy_base_url`` (which must end in ``/v1``); a list
    of them (one per policy replica) is its ``base_url`` list, which it spreads sessions over."""
    urls = [policy_base_url] if isinstance(policy_base_url, str) else list(policy_base_url)
    for url in urls:
        if not url.rstrip("/").endswith("/v1"):
            raise ValueError(f"policy_base_url must end in /v1 (vllm_model appends routes), got {url!r}")
    if not urls:
        raise ValueError("policy_base_url: at least one URL")
    base_url: str | list[str] = [url.rstrip("/") for url in urls] if len(urls) > 1 else urls[0].rstrip("/")
    return Instance(
        name,
        MODEL_DIR,
        {
            "base_url": base_url,
            "api_key": API_KEY,
            "model": model,
            "return_token_id_information": True,
            "uses_reasoning_parser": False,
        },
    )


def resources_instance(name: str) -> Instance:
    """``equivalence_rule`` with exact grading: reward 1.0 iff the answer equals ``expected_answer``."""
    return Instance(name, RESOURCES_DIR, {"grading_rule": "exact", "domain": "knowledge", "verified": False})


def agent_instance(name: str, *, resources: str, model: str, max_steps: int) -> Instance:
    """A ``simple_agent`` using the named resources and model instances."""
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    return Instance(
        name,
        AGENT_DIR,
        {
            "resources_server": {"type": "resources_servers", "name": resources},
            "model_server": {"type": "responses_api_models", "name": model},
            "max_steps": max_steps,
        },
    )


def relay_instance(agent: str) -> Instance:
    """A ``legacy_agent`` environment server relaying ``/run`` to the named agent instance."""
    return Instance(
        relay_name(agent),
        RELAY_DIR,
        {"agent_server": {"type": "responses_api_agents", "name": agent}},
    )


def relay_name(agent: str) -> str:
    """The environment server instance in front of ``agent`` (NeMo Gym's own naming)."""
    return f"{agent}_environment_server"


def global_config(
    instances: Sequence[Instance], addresses: Mapping[str, str], *, head_url: str
) -> dict[str, Any]:
    """The resolved global config dict: every instance at its URL in ``addresses``."""
    config: dict[str, Any] = {
        "head_server": host_port(head_url),
        "default_host": "127.0.0.1",
        "dry_run": False,
        "policy_model_name": next(
            (str(i.settings.get("model")) for i in instances if i.server_dir == MODEL_DIR), ""
        ),
    }
    return {**config, **instance_entries(instances, addresses)}


def instance_entries(instances: Sequence[Instance], addresses: Mapping[str, str]) -> dict[str, Any]:
    """The config entries of ``instances`` alone, each at its URL in ``addresses``."""
    missing = [instance.name for instance in instances if instance.name not in addresses]
    if missing:
        raise ValueError(f"no address for instance(s) {missing}; known: {sorted(addresses)}")
    return {
        instance.name: {
            instance.server_type: {
                instance.implementation: {
                    "entrypoint": "app.py",
                    **host_port(addresses[instance.name]),
                    **instance.settings,
                }
            }
        }
        for instance in instances
    }


def encode(config: Mapping[str, Any]) -> str:
    """The text for ``NEMO_GYM_CONFIG_DICT`` (JSON is YAML, which OmegaConf parses)."""
    return json.dumps(config, sort_keys=False)


def host_port(url: str) -> dict[str, Any]:
    """``{"host", "port"}`` of an ``http://host:port`` URL."""
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"server URL {url!r} must have a host and a port, like http://127.0.0.1:8000")
    return {"host": parts.hostname, "port": parts.port}
