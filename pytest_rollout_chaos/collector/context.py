"""Building a ``CollectorContext`` over a running stack: Gym client, environment, History, tokenizer.

The context is what a trainer hands its collector; the clients it holds are closed on exit.
It records into the History it is given; which servers' events files that History follows is the
trial's to say (``trial.open_trial``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_rollout_chaos.collector.environment import GymEnvironment
from pytest_rollout_chaos.collector.gym_client import GymClient
from pytest_rollout_chaos.collector.protocol import CollectorContext, CollectorSettings
from pytest_rollout_chaos.history import History


def load_tokenizer(model_dir: Path | None) -> Any:
    """The model directory's ``tokenizer.json`` as a ``tokenizers.Tokenizer``, or None without one."""
    if model_dir is None or not (model_dir / "tokenizer.json").is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


@contextlib.asynccontextmanager
async def collector_context(
    *,
    head_url: str,
    resources_url: str,
    policy_url: str,
    model: str,
    eos_token_ids: Iterable[int],
    agent_urls: Mapping[str, str] | None = None,
    model_dir: Path | None = None,
    settings: CollectorSettings | None = None,
    history: History | None = None,
    placement: Mapping[str, str] | None = None,
    gym_python: Path | None = None,
) -> AsyncIterator[CollectorContext]:
    """A fresh context; its Gym client and environment client are closed when the block ends."""
    chosen = settings if settings is not None else CollectorSettings()
    recorded = history if history is not None else History()
    # No deadline on the Gym client, as NeMo Gym's has none: a collector's deadlines are its own.
    client = GymClient(head_url, history=recorded, agent_urls=agent_urls)
    env = GymEnvironment(resources_url, request_timeout_s=chosen.request_timeout_s)
    try:
        yield CollectorContext(
            gym=client,
            policy=policy_url,
            env=env,
            tokenizer=load_tokenizer(model_dir),
            settings=chosen,
            history=recorded,
            model=model,
            eos_token_ids=tuple(eos_token_ids),
            model_dir=model_dir,
            resources_url=resources_url,
            placement=dict(placement or {}),
            head_url=head_url,
            gym_python=gym_python,
        )
    finally:
        await client.close()
        await env.close()
