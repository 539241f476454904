"""Where the ``skyrl`` adapter finds SkyRL's code: the modules it runs, ``skyrl_gym`` beside them,
and what to install where they do not import (``UPSTREAM``; ``UPSTREAM_SKIP_FAILED`` for the
target that turns PR #1986's flag on, which the tree's config must have)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters import skyrl_train_batch as train_batch
from pytest_rollout_chaos.collector.adapters.skyrl_settings import SKIP_FAILED
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.errors import CollectorTargetError

GENERATOR_MODULE: Final = "skyrl.train.generators.skyrl_gym_generator"
CLIENT_MODULE: Final = "skyrl.backends.skyrl_train.inference_servers.remote_inference_client"
ENGINE_UTILS_MODULE: Final = "skyrl.backends.skyrl_train.inference_servers.engine_utils"
SERVER_UTILS_MODULE: Final = "skyrl.backends.skyrl_train.inference_servers.utils"
GENERATOR_UTILS_MODULE: Final = "skyrl.train.generators.utils"
CONFIG_MODULE: Final = "skyrl.train.config"


def use_skyrl_gym() -> None:
    """Put the ``skyrl-gym/`` folder of the tree ``skyrl`` comes from on ``sys.path`` (SkyRL's
    workspace installs it as a package of its own), unless ``skyrl_gym`` is importable already."""
    if importlib.util.find_spec("skyrl_gym") is not None:
        return
    spec = importlib.util.find_spec("skyrl")
    if spec is None or spec.origin is None:
        return
    folder = Path(spec.origin).resolve().parent.parent / "skyrl-gym"
    if folder.is_dir() and str(folder) not in sys.path:
        sys.path.insert(1, str(folder))


@dataclass(frozen=True, slots=True)
class _SkyRLUpstream(Upstream):
    """SkyRL's modules, with ``skyrl_gym`` found beside them; ``setting`` must exist in the tree's
    ``GeneratorConfig`` (the variant that turns PR #1986's flag on needs it)."""

    setting: str | None = None

    def require(self) -> None:
        use_skyrl_gym()
        Upstream.require(self)
        if self.setting is None:
            return
        config: Any = importlib.import_module(CONFIG_MODULE)
        if self.setting not in config.GeneratorConfig.__dataclass_fields__:
            raise CollectorTargetError(
                f"the {self.adapter} target turns on generator.{self.setting}, which the SkyRL tree at "
                f"{self.origin()} does not have (NovaSky-AI/SkyRL PR #1986 adds it); SkyRL's config "
                f"rejects an unknown key, so gate this tree with --target skyrl (the setting's default)"
            )


_MODULES: Final = (
    GENERATOR_MODULE,
    CLIENT_MODULE,
    ENGINE_UTILS_MODULE,
    SERVER_UTILS_MODULE,
    train_batch.TRAINER_MODULE,
    "skyrl_gym",
)
_INSTALL: Final = (
    "pip install torch==2.13.0 'transformers>=5.6.1,<=5.8.0' cloudpathlib loguru tqdm datasets "
    "safetensors tokenizers typer peft==0.18.1 zstandard xxhash rich pillow aiohttp httpx omegaconf "
    "hydra-core gymnasium ray==2.60.0 orjson pybase64 jaxtyping torchdata on Python 3.12, with "
    "--rollout-chaos-upstream=<a SkyRL checkout> (its root and its skyrl-gym/ go on sys.path)"
)
UPSTREAM = _SkyRLUpstream(adapter="skyrl", modules=_MODULES, install=_INSTALL)
UPSTREAM_SKIP_FAILED = _SkyRLUpstream(
    adapter="skyrl_skip_failed_rollouts", modules=_MODULES, install=_INSTALL, setting=SKIP_FAILED
)
