"""Before anything starts: can the run have what its settings name? One usage error if not.

``check(settings)`` runs at session start. A model directory the backend cannot load, a
NeMo Gym backend with no interpreter that imports ``nemo_gym``, or a Toxiproxy mode that
cannot be had (no ``toxiproxy-server``, no Docker engine, a URL nobody answers at) would
otherwise fail every scenario's setup with the same traceback. Here each becomes one line
saying what was tried and what to install or pass, and all of them stop the run together in
one ``pytest.UsageError``. The checks only look (files, one probe request, one interpreter
probe); they start nothing.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import pytest

from pytest_rollout_chaos import extras, targets
from pytest_rollout_chaos.settings import ChaosSettings

if TYPE_CHECKING:
    from pytest_rollout_chaos.ray.host_paths import HiddenPath

TINY_FILES: Final = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
WEIGHT_PATTERNS: Final = ("*.safetensors", "*.bin", "*.pt")
TOKENIZER_FILES: Final = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")


def check(settings: ChaosSettings) -> None:
    """Raise one ``pytest.UsageError`` listing every setting that cannot be had."""
    checks: tuple[Callable[[ChaosSettings], str | None], ...] = (
        model_problem,
        gym_problem,
        toxiproxy_problem,
        ray_problem,
        gpu_problem,
    )
    problems = [problem for check_one in checks if (problem := check_one(settings)) is not None]
    if problems:
        raise pytest.UsageError("\n".join(problems))


def model_problem(settings: ChaosSettings) -> str | None:
    """Whether the backend can load ``settings.model``: its files, and for ``tiny`` a Llama.

    With ``--rollout-chaos-policy-url`` the model is served elsewhere: nothing to load here.
    """
    if settings.policy_url is not None:
        return None  # served elsewhere; --rollout-chaos-policy-url checks that server itself
    model = settings.model
    flag = f"--rollout-chaos-model={model}"
    config_path = model / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{flag}: no config.json there; pass a model directory in Hugging Face layout"
    except (OSError, ValueError) as error:
        return f"{flag}: config.json cannot be read as JSON ({error})"
    if settings.backend == "tiny":
        missing = [name for name in TINY_FILES if not (model / name).is_file()]
        if missing:
            return (
                f"{flag}: the tiny backend needs {', '.join(TINY_FILES)}; missing: {', '.join(missing)} "
                "(or serve it with --rollout-chaos-backend=vllm)"
            )
        if not isinstance(config, dict) or config.get("model_type") != "llama":
            kind = config.get("model_type") if isinstance(config, dict) else None
            return (
                f"{flag}: the tiny backend runs Llama-architecture models only, this one is "
                f"model_type {kind!r}; use --rollout-chaos-backend=vllm for it"
            )
        return None
    if not any(next(model.glob(pattern), None) for pattern in WEIGHT_PATTERNS):
        return f"{flag}: no weights there ({', '.join(WEIGHT_PATTERNS)}); vLLM cannot load it"
    if not any((model / name).is_file() for name in TOKENIZER_FILES):
        return f"{flag}: no tokenizer files there ({', '.join(TOKENIZER_FILES)}); vLLM cannot load it"
    return None


def ray_problem(settings: ChaosSettings) -> str | None:
    """For ``--rollout-chaos-ray`` other than off: Ray importable here (the optional extra); for
    ``hosts:N`` also what its namespaces need (root, ``ip``, ``unshare``: ``ray.netns.missing``), and
    that nothing the hosts read lives where their private ``/tmp`` hides it (``ray.host_paths``)."""
    if not settings.ray.on:
        return None
    import importlib.util

    flag = f"--rollout-chaos-ray={settings.ray.describe()}"
    problems = []
    if importlib.util.find_spec("ray") is None:
        problems.append(
            f"{flag}: Ray is not installed in this interpreter; "
            "install the extra: pip install 'pytest-rollout-chaos[ray]'"
        )
    if settings.ray.kind == "hosts":
        from pytest_rollout_chaos.ray import host_paths
        from pytest_rollout_chaos.ray.netns import missing

        lacking = missing()
        if lacking:
            problems.append(
                f"{flag}: each host is a Linux network, PID and mount namespace this run creates, and "
                f"this machine lacks {'; '.join(lacking)} (local:N runs the nodes without them)"
            )
        if hidden := host_paths.hidden(host_paths.needed(settings)):
            problems.append(hidden_on_hosts(flag, hidden))
    return "\n".join(problems) or None


def hidden_on_hosts(flag: str, hidden: Sequence[HiddenPath]) -> str:
    """The usage error for paths the hosts read that their private ``/tmp`` (or ``/dev/shm``) hides."""
    from pytest_rollout_chaos.ray.netns import PRIVATE_MOUNTS

    mounts = " and ".join(str(mount) for mount in PRIVATE_MOUNTS)
    lines = [
        f"{flag}: each host gets a private {mounts} (empty tmpfs mounts), so the hosts cannot see what "
        "lives there on this machine, and these paths they read are there:",
        *(f"  {path.describe()}" for path in hidden),
        f"move them out of {mounts} (a checkout, a virtualenv or a model elsewhere; pass the new "
        "paths), or run the nodes with --rollout-chaos-ray=local:N, which share this machine's files",
    ]
    return "\n".join(lines)


def gpu_problem(settings: ChaosSettings) -> str | None:
    """GPUs the policy's Ray actor would ask for that this machine does not show (or that mean nothing)."""
    try:
        policy_gpus(settings)
    except ValueError as error:
        return str(error)
    return None


def policy_gpus(settings: ChaosSettings) -> int:
    """How many GPUs the policy asks Ray for on this machine (``ray.resources.policy_gpus``)."""
    from pytest_rollout_chaos.ray.resources import policy_gpus as count
    from pytest_rollout_chaos.servers.policy import gpus, vllm_args

    # Nothing to ask for without Ray or GPUs: nvidia-smi is only asked when it matters.
    backend = "an external server" if settings.policy_url is not None else settings.backend
    wanted = backend == "vllm" and settings.ray.on
    return count(
        ray_on=settings.ray.on,
        backend=backend,
        parallel=vllm_args.parallel_size(settings.vllm_args),
        override=settings.policy_gpus,
        visible=len(gpus.visible()) if wanted else 0,
    )


def gym_problem(settings: ChaosSettings) -> str | None:
    """For ``--rollout-chaos-gym=nemo-gym`` and the ``nemo_gym`` target: an interpreter that imports
    ``nemo_gym``; for that target on the embedded servers, a NeMo Gym whose collection posts ``/run``
    to the agents themselves (from 0.5 on it goes through environment servers, which only the
    nemo-gym backend starts)."""
    needed_by = [flag for flag, needs in _GYM_NEEDED_BY.items() if needs(settings)]
    if not needed_by:
        return None
    from pytest_rollout_chaos.servers.nemo_gym.locate import NemoGymMissingError, locate

    try:
        python = locate(settings.gym_python)
    except NemoGymMissingError as error:
        return f"{' and '.join(needed_by)}: {error}"
    if settings.gym != "nemo-gym" and python.environment_relay:
        return (
            f"--rollout-chaos-target={targets.NEMO_GYM}: NeMo Gym {python.nemo_gym_version}'s rollout "
            "collection reaches agents only through environment servers, which the embedded servers "
            "lack; add --rollout-chaos-gym=nemo-gym (it starts a legacy_agent server in front of each "
            "agent), or give a NeMo Gym 0.4 interpreter"
        )
    return None


_GYM_NEEDED_BY: Final[dict[str, Callable[[ChaosSettings], bool]]] = {
    "--rollout-chaos-gym=nemo-gym": lambda settings: settings.gym == "nemo-gym",
    f"--rollout-chaos-target={targets.NEMO_GYM}": lambda settings: settings.target == targets.NEMO_GYM,
}


def toxiproxy_problem(settings: ChaosSettings) -> str | None:
    """Whether the Toxiproxy the mode names can be had: a URL that answers, the binary, an engine."""
    from pytest_rollout_chaos.servers.toxiproxy import controller

    mode = settings.toxiproxy
    flag = f"--rollout-chaos-toxiproxy={mode}"
    url, source = (mode, flag) if mode.startswith(("http://", "https://")) else ("", "")
    if mode == "auto" and os.environ.get(controller.URL_ENV):
        url, source = os.environ[controller.URL_ENV], f"${controller.URL_ENV} (used by mode auto)"
    if url:
        if controller.api_version(url) is None:
            return (
                f"{source}: no Toxiproxy API answers at {url} (GET /version within "
                f"{controller.PROBE_TIMEOUT_S:g}s); start it (rollout-chaos toxiproxy serves one), "
                "fix the URL, or use --rollout-chaos-toxiproxy=embedded"
            )
        return None
    if mode == "binary" and shutil.which(controller.BINARY) is None:
        return f"{flag}: {controller.BINARY} is not on PATH ({_path_summary()}); {controller.INSTALL_HINT}"
    if mode == "docker" and (why := controller.docker_available()) is not None:
        return (
            f"{flag}: no Docker engine answers ({why}); start Docker or set DOCKER_HOST, "
            "or use --rollout-chaos-toxiproxy=embedded or =binary"
        )
    if mode == "docker" and not extras.installed(extras.DOCKER):
        return f"{flag}: the Docker SDK (the docker package) is not installed here; {extras.DOCKER.install}"
    return None


def _path_summary() -> str:
    entries = [entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry]
    shown = ", ".join(entries[:4]) + (f" and {len(entries) - 4} more" if len(entries) > 4 else "")
    return f"searched {shown}" if entries else "PATH is empty"
