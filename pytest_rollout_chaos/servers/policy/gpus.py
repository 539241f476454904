"""The CUDA devices this machine shows the servers, and how much of one a vLLM engine should take.

``visible()`` asks ``nvidia-smi`` (with a deadline) for each card's memory and keeps the cards
``CUDA_VISIBLE_DEVICES`` lets through (indices or ``GPU-`` UUIDs; MIG instances are not mapped
and count as none). No ``nvidia-smi``, or one that fails, means no GPU: the CPU defaults apply.

``memory_share`` sizes ``--gpu-memory-utilization`` (the part of each card's memory vLLM may
take for weights, activations and KV cache) from the model and the card, so a 7B model gets
what it needs and a small one leaves the card to whatever else runs there.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

GIB: Final = 1024**3
QUERY: Final = (
    "nvidia-smi",
    "--query-gpu=index,uuid,name,memory.total,memory.used",
    "--format=csv,noheader,nounits",
)
QUERY_TIMEOUT_S: Final = 15.0
RUNTIME_BYTES: Final = 2 * GIB  # CUDA context, activations, CUDA graphs, sampler
MIN_KV_BYTES: Final = 2 * GIB  # room for a few thousand tokens of KV cache even for a tiny model
KV_PER_WEIGHT: Final = 0.5  # KV cache as a part of the weights: long enough contexts for a batch
WEIGHT_FILES: Final = ("*.safetensors", "*.bin", "*.pt")
MIN_SHARE: Final = 0.05
MAX_SHARE: Final = 0.9
_DTYPE_BYTES: Final = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
}


@dataclass(frozen=True, slots=True)
class Gpu:
    """One card as ``nvidia-smi`` reports it."""

    index: int
    uuid: str
    name: str
    total_bytes: int
    used_bytes: int

    def describe(self) -> str:
        memory = f"{self.total_bytes / GIB:.0f} GiB, {self.used_bytes / GIB:.1f} used"
        return f"GPU {self.index} ({self.name}, {memory})"


def parse_query(text: str) -> list[Gpu]:
    """The cards in ``nvidia-smi``'s CSV answer to ``QUERY`` (memory in MiB)."""
    cards = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 5 or not fields[0].isdigit():
            continue
        try:
            total, used = int(float(fields[3])) * 1024**2, int(float(fields[4])) * 1024**2
        except ValueError:
            continue
        cards.append(Gpu(int(fields[0]), fields[1], fields[2], total, used))
    return cards


def select(cards: Sequence[Gpu], cuda_visible_devices: str | None) -> list[Gpu]:
    """The cards ``CUDA_VISIBLE_DEVICES`` lets a process see, in its order (None: all of them)."""
    if cuda_visible_devices is None:
        return list(cards)
    chosen: list[Gpu] = []
    for item in (part.strip() for part in cuda_visible_devices.split(",")):
        if item.lstrip("-").isdigit() and int(item) < 0:
            break  # CUDA stops at the first invalid entry; -1 hides every card
        match = [
            card
            for card in cards
            if (item.isdigit() and card.index == int(item))
            or (item.startswith("GPU-") and card.uuid.startswith(item))
        ]
        if not match:
            break
        chosen.append(match[0])
    return chosen


@functools.cache
def visible() -> tuple[Gpu, ...]:
    """The cards this process (and the servers it starts) can use; () on a machine without any."""
    try:
        done = subprocess.run(
            QUERY,
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if done.returncode != 0:
        return ()
    return tuple(select(parse_query(done.stdout), os.environ.get("CUDA_VISIBLE_DEVICES")))


def describe_none() -> str:
    """Why no GPU counts as visible here, for error messages."""
    cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    return (
        f"CUDA_VISIBLE_DEVICES={cuda!r} hides them"
        if cuda is not None
        else "nvidia-smi lists no card (or is not installed)"
    )


def loaded_bytes(model_dir: Path, dtype: str = "auto") -> int:
    """About how many bytes the weights take once loaded in ``dtype`` (vLLM's ``--dtype``).

    The weight files' size, scaled from the checkpoint's dtype (``config.json``) to the loaded
    one: ``auto`` loads a float32 checkpoint in 16 bits and any other as stored.
    """
    on_disk = sum(path.stat().st_size for pattern in WEIGHT_FILES for path in model_dir.glob(pattern))
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    stored = (
        _DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or ""), 0)
        if isinstance(config, dict)
        else 0
    )
    if not stored:
        return on_disk
    loaded = (2 if stored == 4 else stored) if dtype == "auto" else _DTYPE_BYTES.get(dtype, stored)
    return on_disk * loaded // stored


def memory_share(weight_bytes: int, card_bytes: int, *, parallel: int = 1) -> float:
    """``--gpu-memory-utilization`` for weights of ``weight_bytes`` split over ``parallel`` cards of
    ``card_bytes`` each: the weights, the runtime's own memory and a KV cache half the weights'
    size (2 GiB at least), rounded up to 0.05, from ``MIN_SHARE`` to ``MAX_SHARE``."""
    if card_bytes <= 0 or parallel < 1:
        raise ValueError(f"card_bytes must be > 0 and parallel >= 1, not {card_bytes} and {parallel}")
    per_card = weight_bytes / parallel
    need = per_card + RUNTIME_BYTES + max(MIN_KV_BYTES, KV_PER_WEIGHT * per_card)
    share = math.ceil(round(need / card_bytes / 0.05, 6)) * 0.05
    return round(min(MAX_SHARE, max(MIN_SHARE, share)), 2)
