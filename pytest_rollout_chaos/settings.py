"""ChaosSettings: every option's effective value for one run, and the options' names.

The options are an interface (ARCHITECTURE.md#options); ``options`` reads them from the command
line or ini and validates them.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Final, Literal

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.ray import mode as ray_mode

Backend = Literal["tiny", "vllm"]
GymBackend = Literal["embedded", "nemo-gym"]
LogsMode = Literal["implicated", "all", "none"]

BACKENDS: Final = ("tiny", "vllm")
GYM_BACKENDS: Final = ("embedded", "nemo-gym")
TOXIPROXY_MODES: Final = ("auto", "embedded", "binary", "docker")
LOGS_MODES: Final = ("implicated", "all", "none")

# Option destinations double as ini names; the tests import these constants.
OPT_ENABLED: Final = "rollout_chaos"
OPT_TARGET: Final = "rollout_chaos_target"
OPT_BACKEND: Final = "rollout_chaos_backend"
OPT_MODEL: Final = "rollout_chaos_model"
OPT_TOXIPROXY: Final = "rollout_chaos_toxiproxy"
OPT_GYM: Final = "rollout_chaos_gym"
OPT_GYM_PYTHON: Final = "rollout_chaos_gym_python"
OPT_VLLM_PYTHON: Final = "rollout_chaos_vllm_python"
OPT_SEED: Final = "rollout_chaos_seed"
OPT_REPORT: Final = "rollout_chaos_report"
OPT_JSON: Final = "rollout_chaos_json"
OPT_POLICY_URL: Final = "rollout_chaos_policy_url"
OPT_UPSTREAM: Final = "rollout_chaos_upstream"
OPT_RAY: Final = "rollout_chaos_ray"
OPT_VLLM_ARGS: Final = "rollout_chaos_vllm_args"
OPT_POLICY_GPUS: Final = "rollout_chaos_policy_gpus"
OPT_POLICY_REPLICAS: Final = "rollout_chaos_policy_replicas"
OPT_LAYER_PROCESSES: Final = "rollout_chaos_layer_processes"
OPT_REDRAWS: Final = "rollout_chaos_redraws"
OPT_FUZZ: Final = "rollout_chaos_fuzz"
OPT_FUZZ_DIR: Final = "rollout_chaos_fuzz_dir"
OPT_SCENARIO: Final = "rollout_chaos_scenario"
OPT_LOGS: Final = "rollout_chaos_logs"
DEFAULT_FUZZ_DIR: Final = "rollout-chaos-fuzz"
DEFAULT_REDRAWS: Final = 2
# ini only (``-o`` sets it on the command line): how long an external policy may take to be ready.
INI_POLICY_READY_TIMEOUT: Final = "rollout_chaos_policy_ready_timeout_s"
DEFAULT_POLICY_READY_TIMEOUT_S: Final = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class ChaosSettings:
    """The effective configuration of one pytest run."""

    enabled: bool = False
    target: str = "reference"
    backend: Backend = "tiny"
    model: Path = dataclasses.field(default_factory=bundled.tiny_model_dir)
    toxiproxy: str = "auto"
    gym: GymBackend = "embedded"
    gym_python: Path | None = None
    vllm_python: Path | None = None
    seed: int = 0
    report: Path | None = None
    json_report: Path | None = None  # the JSON results document (--rollout-chaos-json)
    # An already-running OpenAI-compatible policy server (its root, ``http://host:port``, no
    # ``/v1``): the harness starts no policy and ``backend`` is unused.
    policy_url: str | None = None
    policy_ready_timeout_s: float = DEFAULT_POLICY_READY_TIMEOUT_S
    # A checkout or unpacked tree of the trainer an adapter target drives; put first on sys.path.
    upstream: Path | None = None
    # Where the policy and Gym servers run: here (off), in Ray actors on a local cluster, or on a cluster.
    ray: ray_mode.RayMode = ray_mode.OFF
    # The user's own ``vllm serve`` flags, shell-split, passed after the harness's own.
    vllm_args: tuple[str, ...] = ()
    # GPUs the policy's Ray actor asks for; None: from the vLLM flags' parallel size.
    policy_gpus: int | None = None
    # Policy servers started behind the model server, which spreads model calls over them.
    policy_replicas: int = 1
    # The fault layer's processes: 1, or more, the main one deciding every request (``workers``).
    layer_processes: int = 1
    # How often a scenario whose run tested nothing is drawn again where the policy samples
    # irreproducibly (real vLLM, an external server): such a run is no verdict (``engine.run.run_on``).
    redraws: int = DEFAULT_REDRAWS
    # The Hugging Face id ``model`` was found by in the local cache; "" for a directory given as one.
    model_id: str = ""
    # Drawn variants of each scenario run after the catalog (--rollout-chaos-fuzz), and where the
    # smallest failing draw of each is written as a scenario file.
    fuzz: int = 0
    fuzz_dir: Path = Path(DEFAULT_FUZZ_DIR)
    # Built-in scenarios named on the command line or in the ini (--rollout-chaos-scenario), collected
    # beside the paths given (alone in a bare ``pytest --rollout-chaos``).
    scenarios: tuple[str, ...] = ()
    # Whose log tails a failure's report shows: the servers its story names, every server's, or none.
    logs: LogsMode = "implicated"

    def header_line(self) -> str:
        """One line for ``pytest_report_header``."""
        parts = [
            f"target={self.target}",
            f"policy={self.policy_url} (external)" if self.policy_url else f"backend={self.backend}",
            f"model={self.model_id} ({self.model})" if self.model_id else f"model={self.model}",
            f"toxiproxy={self.toxiproxy}",
            f"gym={self.gym}",
            f"seed={self.seed}",
        ]
        if self.upstream is not None:
            parts.append(f"upstream={self.upstream}")
        if self.vllm_args:
            parts.append(f"vllm-args={shlex.join(self.vllm_args)}")
        if self.ray.on:
            parts.append(f"ray={self.ray.describe()}")
        if self.policy_replicas != 1:
            parts.append(f"policy-replicas={self.policy_replicas}")
        if self.policy_gpus is not None:
            parts.append(f"policy-gpus={self.policy_gpus}")
        if self.layer_processes != 1:
            parts.append(f"layer-processes={self.layer_processes}")
        if self.redraws != DEFAULT_REDRAWS:
            parts.append(f"redraws={self.redraws}")
        if self.scenarios:
            parts.append(f"scenarios={','.join(self.scenarios)}")
        if self.fuzz:
            parts.append(f"fuzz={self.fuzz} draws per scenario, failures to {self.fuzz_dir}")
        if self.logs != "implicated":
            parts.append(f"logs={self.logs}")
        if self.report is not None:
            parts.append(f"report={self.report}")
        if self.json_report is not None:
            parts.append(f"json={self.json_report}")
        return "rollout-chaos: " + ", ".join(parts)
