"""ServerSpec builders for the policy server, and ``PolicyServer``, what the ``chaos_policy`` fixture yields.

``tiny_policy_spec`` runs this package's own server (binds port 0 and reports it);
``vllm_policy_spec`` (in ``vllm.py``, re-exported here with ``VllmPython`` and ``locate_vllm``)
runs real vLLM's OpenAI server from the interpreter ``locate_vllm`` finds. A server this run did
not start (``--rollout-chaos-policy-url``) is a ``PolicyServer.external``: no process.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.policy.protocol import RESEED_ROUTE
from pytest_rollout_chaos.servers.policy.vllm import VllmPython, vllm_policy_spec
from pytest_rollout_chaos.servers.policy.vllm import locate as locate_vllm
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec

__all__ = [
    "DEFAULT_SERVED_MODEL_NAME",
    "EXTERNAL_BACKEND",
    "PolicyServer",
    "VllmPython",
    "locate_vllm",
    "tiny_policy_spec",
    "vllm_policy_spec",
]

DEFAULT_SERVED_MODEL_NAME: Final = "tiny-llama"
EXTERNAL_BACKEND: Final = "external"


@dataclass(frozen=True, slots=True)
class PolicyServer:
    """A running policy server: its process, if this run started it, and where to reach it.

    ``process`` is None for an external server (``--rollout-chaos-policy-url``): this run did
    not start it, so nothing may signal, restart or stop it, and it has no events file.
    """

    process: ManagedProcess | None
    url: str  # "http://HOST:PORT": /health, /tokenize, /detokenize
    base_url: str  # url + "/v1": what OpenAI clients take
    model: str  # the served model name requests must use
    model_dir: Path  # tokenizer and end-of-turn token of the served model
    backend: str  # "tiny", "vllm" or "external"
    pins_tool_calls: bool = False  # real vLLM forcing each tool call's envelope (``vllm.pins_tool_calls``)

    @classmethod
    def of(
        cls,
        process: ManagedProcess,
        *,
        model: str,
        model_dir: Path,
        backend: str,
        pins_tool_calls: bool = False,
    ) -> PolicyServer:
        url = process.url
        return cls(process, url, url + "/v1", model, model_dir, backend, pins_tool_calls)

    @classmethod
    def external(cls, url: str, *, model: str, model_dir: Path) -> PolicyServer:
        """A server someone else runs at ``url`` (with or without ``/v1``)."""
        root = url.rstrip("/").removesuffix("/v1")
        return cls(None, root, root + "/v1", model, model_dir, EXTERNAL_BACKEND)

    def unmanaged_reason(self) -> str | None:
        """Why no process fault can act on this server, or None when this run manages its process."""
        if self.process is not None:
            return None
        return (
            f"the policy is an external server (--rollout-chaos-policy-url={self.base_url}), "
            "which this run did not start and cannot signal"
        )

    def reseed(self, seed: int | None, *, timeout_s: float = 5.0) -> None:
        """The seeds the tiny server gives requests that bring none: from ``seed`` (``stack.policy.seed``),
        or the session's sequence again (None). vLLM and an external server have no such switch: the
        fit step keeps seeded scenarios away from them."""
        if self.backend != "tiny":
            raise ValueError(f"only the tiny policy can be reseeded, not the {self.backend} one")
        request = urllib.request.Request(
            self.url + RESEED_ROUTE,
            data=json.dumps({"seed": seed}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            answer.read()

    def events_files(self) -> list[Path]:
        """The History events file the server writes, if it is ours and writes one."""
        if self.process is None:
            return []
        path = self.process.spec.env.get(EVENTS_FILE_ENV)
        return [Path(path)] if path else []


def tiny_policy_spec(
    model_dir: Path,
    *,
    name: str = "policy",
    served_model_name: str = DEFAULT_SERVED_MODEL_NAME,
    seed: int = 0,
    events_file: Path | None = None,
) -> ServerSpec:
    """The tiny torch policy server on an OS-chosen loopback port, ready when ``/health`` answers."""
    argv = (
        sys.executable,
        # torch warns at import when numpy is missing; the server never needs numpy.
        "-W",
        "ignore:Failed to initialize NumPy:UserWarning",
        "-m",
        "pytest_rollout_chaos.servers.policy",
        "--model",
        str(model_dir),
        "--served-model-name",
        served_model_name,
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--seed",
        str(seed),
    )
    return ServerSpec(
        name=name,
        argv=argv,
        probe=readiness.all_of(readiness.address_known(), readiness.http_ok("/health")),
        env={EVENTS_FILE_ENV: str(events_file)} if events_file is not None else {},
        ready_timeout_s=30.0,
        hint=f"the tiny policy server could not serve {str(model_dir)!r}; is it an HF-layout Llama dir?",
    )
