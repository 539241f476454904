"""The ``--rollout-chaos*`` options and their ini twins read into ``ChaosSettings``, once, and validated.

The command line wins over ``[tool.pytest.ini_options]``; both win over the defaults. A bad
value is a ``pytest.UsageError`` naming the value, where it came from and what is valid.
"""

from __future__ import annotations

import difflib
import math
import urllib.parse
from pathlib import Path
from typing import Final, cast

import pytest

from pytest_rollout_chaos import bundled, targets
from pytest_rollout_chaos.ray import mode as ray_mode
from pytest_rollout_chaos.servers.faultlayer.spec import MAX_PROCESSES, layer_processes
from pytest_rollout_chaos.servers.policy import hf_cache, vllm_args
from pytest_rollout_chaos.settings import (
    BACKENDS,
    DEFAULT_FUZZ_DIR,
    DEFAULT_POLICY_READY_TIMEOUT_S,
    DEFAULT_REDRAWS,
    GYM_BACKENDS,
    INI_POLICY_READY_TIMEOUT,
    LOGS_MODES,
    OPT_BACKEND,
    OPT_ENABLED,
    OPT_FUZZ,
    OPT_FUZZ_DIR,
    OPT_GYM,
    OPT_GYM_PYTHON,
    OPT_JSON,
    OPT_LAYER_PROCESSES,
    OPT_LOGS,
    OPT_MODEL,
    OPT_POLICY_GPUS,
    OPT_POLICY_REPLICAS,
    OPT_POLICY_URL,
    OPT_RAY,
    OPT_REDRAWS,
    OPT_REPORT,
    OPT_SCENARIO,
    OPT_SEED,
    OPT_TARGET,
    OPT_TOXIPROXY,
    OPT_UPSTREAM,
    OPT_VLLM_ARGS,
    OPT_VLLM_PYTHON,
    TOXIPROXY_MODES,
    Backend,
    ChaosSettings,
    GymBackend,
    LogsMode,
)

POLICY_URL_VALID: Final = (
    "an http:// or https:// URL with host:port of an OpenAI-compatible server, "
    "with or without a trailing /v1, such as 'http://127.0.0.1:8000/v1'"
)


def resolve(config: pytest.Config) -> ChaosSettings:
    """Build the settings from ``config``; raise ``pytest.UsageError`` on any bad value."""
    raw = _Raw(config)
    enabled = _parse_bool(raw.get(OPT_ENABLED), raw.source(OPT_ENABLED), default=False)
    target = raw.get(OPT_TARGET) or "reference"
    _validate_target(target, raw.source(OPT_TARGET))
    backend = _choice(raw.get(OPT_BACKEND) or "tiny", BACKENDS, raw.source(OPT_BACKEND))
    gym = _choice(raw.get(OPT_GYM) or "embedded", GYM_BACKENDS, raw.source(OPT_GYM))
    toxiproxy = raw.get(OPT_TOXIPROXY) or "auto"
    if toxiproxy not in TOXIPROXY_MODES and not toxiproxy.startswith(("http://", "https://")):
        raise pytest.UsageError(
            f"{raw.source(OPT_TOXIPROXY)}: invalid value {toxiproxy!r} "
            f"(valid: {', '.join(TOXIPROXY_MODES)}, or an http:// URL of a Toxiproxy API)"
        )
    model, model_id = _model(raw)
    gym_python = raw.path(OPT_GYM_PYTHON) if raw.get(OPT_GYM_PYTHON) else None
    if gym_python is not None and not gym_python.exists():
        raise pytest.UsageError(
            f"{raw.source(OPT_GYM_PYTHON)}: interpreter {str(gym_python)!r} does not exist "
            "(valid: the path of a python that can import nemo_gym)"
        )
    vllm_python = raw.path(OPT_VLLM_PYTHON) if raw.get(OPT_VLLM_PYTHON) else None
    if vllm_python is not None and not vllm_python.exists():
        raise pytest.UsageError(
            f"{raw.source(OPT_VLLM_PYTHON)}: interpreter {str(vllm_python)!r} does not exist "
            "(valid: the path of a python that can import vllm)"
        )
    seed = _parse_seed(raw.get(OPT_SEED), raw.source(OPT_SEED))
    report = raw.path(OPT_REPORT) if raw.get(OPT_REPORT) else None
    json_report = raw.path(OPT_JSON) if raw.get(OPT_JSON) else None
    policy_text = raw.get(OPT_POLICY_URL)
    policy_url = None
    if policy_text:
        try:
            policy_url = policy_root_url(policy_text)
        except ValueError as error:
            raise pytest.UsageError(
                f"{raw.source(OPT_POLICY_URL)}: invalid value {policy_text!r}: {error} "
                f"(valid: {POLICY_URL_VALID})"
            ) from None
    upstream = raw.path(OPT_UPSTREAM) if raw.get(OPT_UPSTREAM) else None
    if upstream is not None and not upstream.is_dir():
        raise pytest.UsageError(
            f"{raw.source(OPT_UPSTREAM)}: directory {str(upstream)!r} does not exist "
            "(valid: a checkout or unpacked tree of the trainer, whose root holds its package, "
            "such as the folder with nemo_rl/ in it)"
        )
    try:
        ray = ray_mode.parse(raw.get(OPT_RAY))
    except ValueError as error:
        raise pytest.UsageError(
            f"{raw.source(OPT_RAY)}: invalid value {raw.get(OPT_RAY)!r}: {error} (valid: {ray_mode.VALID})"
        ) from None
    user_vllm_args = _vllm_args(raw, backend, policy_url)
    redraws = _parse_count(raw.get(OPT_REDRAWS) or None, raw.source(OPT_REDRAWS))
    return ChaosSettings(
        enabled=enabled,
        target=target,
        backend=cast(Backend, backend),
        model=model,
        toxiproxy=toxiproxy,
        gym=cast(GymBackend, gym),
        gym_python=gym_python,
        vllm_python=vllm_python,
        seed=seed,
        report=report,
        json_report=json_report,
        policy_url=policy_url,
        policy_ready_timeout_s=_parse_timeout(config),
        upstream=upstream,
        ray=ray,
        vllm_args=user_vllm_args,
        policy_gpus=_parse_count(raw.get(OPT_POLICY_GPUS), raw.source(OPT_POLICY_GPUS)),
        policy_replicas=_policy_replicas(raw, policy_url),
        layer_processes=_layer_processes(raw),
        redraws=DEFAULT_REDRAWS if redraws is None else redraws,
        model_id=model_id,
        fuzz=_parse_count(raw.get(OPT_FUZZ) or None, raw.source(OPT_FUZZ)) or 0,
        fuzz_dir=raw.path(OPT_FUZZ_DIR) if raw.get(OPT_FUZZ_DIR) else _invoked_in(config) / DEFAULT_FUZZ_DIR,
        scenarios=_scenarios(raw),
        logs=cast(LogsMode, _choice(raw.get(OPT_LOGS) or "implicated", LOGS_MODES, raw.source(OPT_LOGS))),
    )


def _scenarios(raw: _Raw) -> tuple[str, ...]:
    """The built-in scenarios ``--rollout-chaos-scenario`` names (comma-separated); an unknown name
    is a usage error listing the catalog's names."""
    text = raw.get(OPT_SCENARIO)
    if not text:
        return ()
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    known = list(bundled.catalog_files())
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        what = f"unknown built-in scenario{'s' if len(unknown) > 1 else ''} " + ", ".join(map(repr, unknown))
        close = [match for name in unknown for match in difflib.get_close_matches(name, known, n=1)]
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise pytest.UsageError(
            f"{raw.source(OPT_SCENARIO)}: {what if unknown else 'no scenario named'}{hint} "
            f"(valid: {', '.join(known)}; `rollout-chaos list` describes them; a scenario file of "
            "your own is named by its path)"
        )
    return names


def _model(raw: _Raw) -> tuple[Path, str]:
    """The model directory, and the Hugging Face id it was found by ("" when given as a directory)."""
    text = raw.get(OPT_MODEL)
    if not text:
        return bundled.tiny_model_dir(), ""
    model = raw.path(OPT_MODEL)
    if model.is_dir():
        return model, ""
    valid = (
        "valid: a directory in Hugging Face layout, with config.json and tokenizer files, or the id of "
        "a model in the local Hugging Face cache, such as Qwen/Qwen2.5-0.5B-Instruct"
    )
    if not hf_cache.looks_like_id(text):
        raise pytest.UsageError(
            f"{raw.source(OPT_MODEL)}: model directory {str(model)!r} does not exist ({valid})"
        )
    try:
        return hf_cache.resolve(text), text
    except hf_cache.ModelNotCachedError as error:
        raise pytest.UsageError(
            f"{raw.source(OPT_MODEL)}: {text!r} is not a model directory ({model} does not exist), "
            f"and {error}"
        ) from None


def _vllm_args(raw: _Raw, backend: str, policy_url: str | None) -> tuple[str, ...]:
    """The user's ``vllm serve`` flags, shell-split; a flag the harness sets is a usage error."""
    text = raw.get(OPT_VLLM_ARGS)
    if not text:
        return ()
    source = raw.source(OPT_VLLM_ARGS)
    if policy_url is not None or backend != "vllm":
        used = (
            f"the server at --rollout-chaos-policy-url={policy_url}"
            if policy_url
            else f"the {backend} backend"
        )
        raise pytest.UsageError(
            f"{source}: {text!r} are flags for the `vllm serve` that --rollout-chaos-backend=vllm starts; "
            f"this run's policy is {used}"
        )
    try:
        args = vllm_args.split(text)
    except ValueError as error:
        raise pytest.UsageError(f"{source}: {text!r} cannot be split as a shell would: {error}") from None
    problem = vllm_args.reserved_problem(args, source=source)
    if problem is None:
        try:
            vllm_args.parallel_size(args)
        except ValueError as error:
            problem = str(error).replace(vllm_args.OPTION, source, 1)
    if problem is not None:
        raise pytest.UsageError(problem)
    return args


def _policy_replicas(raw: _Raw, policy_url: str | None) -> int:
    """How many policy servers to start: a whole number >= 1, and 1 beside an external policy."""
    value = raw.get(OPT_POLICY_REPLICAS)
    if value is None or value == "":
        return 1
    source = raw.source(OPT_POLICY_REPLICAS)
    if not value.strip().isdigit() or int(value) < 1:
        raise pytest.UsageError(f"{source}: invalid value {value!r} (valid: a whole number >= 1)")
    replicas = int(value)
    if replicas > 1 and policy_url is not None:
        raise pytest.UsageError(
            f"{source}: {replicas} replicas cannot be started beside "
            f"--rollout-chaos-policy-url={policy_url}, which names one server this run does not start "
            "(valid: 1, or leave out the policy URL)"
        )
    return replicas


def _layer_processes(raw: _Raw) -> int:
    """The fault layer's processes: a whole number >= 1, or ``auto`` (the machine's cores, capped)."""
    value = (raw.get(OPT_LAYER_PROCESSES) or "1").strip()
    if value == "auto":
        return layer_processes(0)
    if not value.isdigit() or int(value) < 1:
        raise pytest.UsageError(
            f"{raw.source(OPT_LAYER_PROCESSES)}: invalid value {value!r} "
            f"(valid: a whole number >= 1, or auto: the machine's cores, at most {MAX_PROCESSES})"
        )
    return int(value)


def _invoked_in(config: pytest.Config) -> Path:
    return Path(config.invocation_params.dir)


def _parse_count(value: str | None, source: str) -> int | None:
    if value is None:
        return None
    if not value.isdigit():
        raise pytest.UsageError(f"{source}: invalid value {value!r} (valid: a whole number >= 0)")
    return int(value)


def policy_root_url(text: str) -> str:
    """``http://host:port`` from a policy URL with or without ``/v1``; ``ValueError`` says what is wrong.

    The port may be left out only where the scheme implies it (80, 443); the result always names it,
    because every link of the stack is a proxy to one host:port.
    """
    parts = urllib.parse.urlsplit(text.strip())
    if not parts.scheme:
        raise ValueError("there is no scheme")
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"the scheme must be http or https, not {parts.scheme!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the port of {parts.netloc!r} is not a number from 1 to 65535") from None
    if not parts.hostname:
        raise ValueError("there is no host")
    if parts.username is not None or parts.query or parts.fragment:
        raise ValueError("credentials, a query or a fragment cannot be used")
    if parts.path.rstrip("/") not in ("", "/v1"):
        raise ValueError(f"the path {parts.path!r} is neither empty nor /v1")
    if port == 0:
        raise ValueError("port 0 names no server")
    port = port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


def enabled_early(config: pytest.Config) -> bool:
    """Whether ``--rollout-chaos`` (or its ini twin) is on, before the command line is fully parsed.

    For hooks that run ahead of ``pytest_configure``; a bad value counts as off here, and
    ``resolve`` reports it.
    """
    option = getattr(config.known_args_namespace, OPT_ENABLED, None)
    if option is not None:
        return bool(option)
    try:
        return _parse_bool(str(config.getini(OPT_ENABLED)).strip() or None, "", default=False)
    except pytest.UsageError:
        return False


class _Raw:
    """Option-or-ini lookup that remembers where each value came from."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    def _from_option(self, name: str) -> object:
        return self._config.getoption(name, default=None)

    def get(self, name: str) -> str | None:
        option = self._from_option(name)
        if option is not None:
            return str(option)
        ini = self._config.getini(name)
        return str(ini).strip() if ini not in (None, "") else None

    def source(self, name: str) -> str:
        flag = "--" + name.replace("_", "-")
        if self._from_option(name) is not None:
            return flag
        return f"ini option {name!r} (twin of {flag})"

    def path(self, name: str) -> Path:
        text = self.get(name)
        assert text is not None  # callers check first; not user-input validation
        path = Path(text).expanduser()
        if path.is_absolute():
            return path
        if self._from_option(name) is not None:
            return Path(self._config.invocation_params.dir) / path
        base = self._config.inipath.parent if self._config.inipath else self._config.rootpath
        return base / path


def _choice(value: str, valid: tuple[str, ...], source: str) -> str:
    if value not in valid:
        raise pytest.UsageError(f"{source}: invalid value {value!r} (valid: {', '.join(valid)})")
    return value


def _parse_bool(value: str | None, source: str, *, default: bool) -> bool:
    if value is None:
        return default
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise pytest.UsageError(f"{source}: invalid value {value!r} (valid: true, false)")


def _parse_seed(value: str | None, source: str) -> int:
    if value is None:
        return 0
    try:
        seed = int(value)
    except ValueError:
        seed = -1
    if seed < 0:
        raise pytest.UsageError(f"{source}: invalid value {value!r} (valid: an integer >= 0)")
    return seed


def _parse_timeout(config: pytest.Config) -> float:
    text = str(config.getini(INI_POLICY_READY_TIMEOUT) or "").strip()
    if not text:
        return DEFAULT_POLICY_READY_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value > 0 and math.isfinite(value)):
        raise pytest.UsageError(
            f"ini option {INI_POLICY_READY_TIMEOUT!r}: invalid value {text!r} "
            "(valid: seconds > 0, such as 120)"
        )
    return value


def _validate_target(target: str, source: str) -> None:
    if target in targets.BUILTIN:
        return
    module, sep, factory = target.partition(":")
    if not sep or not module or not factory:
        raise pytest.UsageError(f"{source}: invalid value {target!r} (valid: {targets.valid_targets()})")
