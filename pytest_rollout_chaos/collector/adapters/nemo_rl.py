"""The ``nemo_rl`` adapter: NeMo RL's real rollout code against the stack (written in its own change)."""

from __future__ import annotations

from pytest_rollout_chaos.collector.adapters.upstream import Upstream

UPSTREAM = Upstream(
    adapter="nemo_rl",
    modules=("nemo_rl.environments.nemo_gym", "nemo_rl.experience.rollouts"),
    install=(
        "pip install torch==2.13.0 numpy pillow requests typing_extensions transformers==5.5.4 "
        "ray==2.60.0 datasets fastapi uvicorn pyzmq rich tqdm wandb decord"
    ),
)
