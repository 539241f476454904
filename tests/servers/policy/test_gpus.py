"""Reading nvidia-smi's answer, CUDA_VISIBLE_DEVICES, the loaded size of weights, the memory share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rollout_chaos.servers.policy import gpus
from pytest_rollout_chaos.servers.policy.gpus import GIB, MAX_SHARE, MIN_SHARE, Gpu, memory_share

# nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used --format=csv,noheader,nounits
SMI = """0, GPU-6a1c0d2e-aaaa, NVIDIA H100 80GB HBM3, 81559, 1024
1, GPU-77b0f1e3-bbbb, NVIDIA H100 80GB HBM3, 81559, 0
"""


def test_parse_query() -> None:
    cards = gpus.parse_query(SMI + "No devices were found\n")
    assert cards == [
        Gpu(0, "GPU-6a1c0d2e-aaaa", "NVIDIA H100 80GB HBM3", 81559 * 1024**2, 1024 * 1024**2),
        Gpu(1, "GPU-77b0f1e3-bbbb", "NVIDIA H100 80GB HBM3", 81559 * 1024**2, 0),
    ]
    assert cards[0].describe() == "GPU 0 (NVIDIA H100 80GB HBM3, 80 GiB, 1.0 used)"


@pytest.mark.parametrize(
    ("cuda_visible_devices", "indices"),
    [
        (None, [0, 1]),
        ("", []),
        ("-1", []),
        ("1", [1]),
        ("1,0", [1, 0]),
        ("GPU-77b0", [1]),
        ("0,7,1", [0]),  # CUDA stops at the first device that is not there
        ("MIG-1234", []),
    ],
)
def test_cuda_visible_devices_selects_the_cards(cuda_visible_devices: str | None, indices: list[int]) -> None:
    cards = gpus.parse_query(SMI)
    assert [card.index for card in gpus.select(cards, cuda_visible_devices)] == indices


def test_no_gpu_here_means_none_visible() -> None:
    if gpus.visible():
        pytest.skip("this machine has a CUDA device")
    assert gpus.visible() == ()


def _model(path: Path, weight_bytes: int, config: dict[str, object]) -> Path:
    path.joinpath("config.json").write_text(json.dumps(config))
    with path.joinpath("model-00001-of-00001.safetensors").open("wb") as weights:
        weights.truncate(weight_bytes)
    return path


@pytest.mark.parametrize(
    ("stored", "dtype", "loaded"),
    [
        ("float32", "auto", 2 * GIB),  # auto loads a float32 checkpoint in 16 bits
        ("bfloat16", "auto", 4 * GIB),
        ("bfloat16", "float32", 8 * GIB),
        ("float32", "float32", 4 * GIB),
        ("float16", "half", 4 * GIB),
    ],
)
def test_loaded_bytes(tmp_path: Path, stored: str, dtype: str, loaded: int) -> None:
    size = 4 * GIB
    assert gpus.loaded_bytes(_model(tmp_path, size, {"torch_dtype": stored}), dtype) == loaded


def test_loaded_bytes_of_an_unknown_dtype_is_the_size_on_disk(tmp_path: Path) -> None:
    assert gpus.loaded_bytes(_model(tmp_path, 1000, {}), "auto") == 1000


@pytest.mark.parametrize(
    ("weights_gib", "card_gib", "parallel", "share"),
    [
        (1, 80, 1, 0.1),  # 1 + 2 + 2 = 5 GiB: 0.0625 -> 0.1
        (15, 80, 1, 0.35),  # 15 + 2 + 7.5 = 24.5: 0.306 -> 0.35
        (15, 80, 2, 0.2),  # per card 7.5 + 2 + 3.75 = 13.25: 0.166 -> 0.2
        (15, 24, 1, 0.9),  # does not fit: the most a card can give
        (0, 1000, 1, MIN_SHARE),
        (140, 80, 2, 0.9),  # 70 + 2 + 35 per card
        (8, 40, 1, 0.35),  # 8 + 2 + 4 = 14 of 40: exactly 0.35 stays 0.35
    ],
)
def test_memory_share(weights_gib: int, card_gib: int, parallel: int, share: float) -> None:
    assert memory_share(weights_gib * GIB, card_gib * GIB, parallel=parallel) == share
    assert MIN_SHARE <= share <= MAX_SHARE


def test_memory_share_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="card_bytes must be > 0 and parallel >= 1"):
        memory_share(GIB, 0)
