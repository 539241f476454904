"""NeMo RL's code as the importable tree has it, for the ``nemo_rl`` adapter: the ``NemoGym`` actor
class and the caller, which API generation they speak, the caller's input batch and tokenizer, and
what the actor's skipped spin-up would have set (``GymHelper``: NeMo Gym's own client where it
imports, ``nemo_rl_gym``, else the stand-in over the stack's Gym client).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any, Final
from urllib.parse import urlsplit

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.collector.adapters import nemo_rl_settings
from pytest_rollout_chaos.collector.adapters.nemo_rl_actor import spun_up
from pytest_rollout_chaos.collector.adapters.own_gym import OwnGym
from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings, nested
from pytest_rollout_chaos.collector.groups import group_size
from pytest_rollout_chaos.collector.protocol import CollectorContext, Row
from pytest_rollout_chaos.errors import CollectorTargetError

SOURCE: Final = "collector"
GROUP_SIZE: Final = "grpo.num_generations_per_prompt"


# -- what spin-up would have set ------------------------------------------------------------------


class GymHelper:
    """NeMo Gym's ``RolloutCollectionHelper`` for the actor: NeMo Gym's own (``own``: the helper and
    the head's ``BaseServerConfig``, ``own_gym.own_client``) or, where ``nemo_gym`` does not import,
    the stand-in over this stack's Gym client; each call recorded (``begin``)."""

    def __init__(self, ctx: CollectorContext, *, own: tuple[Any, Any] | None = None) -> None:
        self._ctx = ctx
        self.calls = 0
        self.own = None if own is None else own[0]
        if own is not None:
            self.head_server_config = own[1]
        else:
            head = urlsplit(str(getattr(ctx.gym, "head_url", "")))
            self.head_server_config = SimpleNamespace(host=head.hostname, port=head.port)

    def begin(self, rows: int) -> int:
        """Record a ``run_examples`` call of ``rows`` rows; how many of its results go on to NeMo RL
        (fewer only when the ``short_results`` fault armed the Gym client: it acts here)."""
        self._record(rows)
        shorten = getattr(self._ctx.gym, "results_to_yield", None)  # a GymClient's; a runner may lack it
        return rows if shorten is None else int(shorten(rows))

    def run_examples(
        self, examples: list[dict[str, Any]], head_server_config: Any = None, semaphore: Any = None
    ) -> Any:
        """NeMo Gym's own ``run_examples`` (``own_gym.OwnGym``), or the stand-in's: one ``/run``
        per example, awaitables in completion order (the client's own contract)."""
        if self.own is not None:
            return OwnGym(self.own, self).run_examples(examples, head_server_config, semaphore)
        if semaphore is not None:
            raise CollectorTargetError("NeMo RL passed run_examples a semaphore; the Gym client takes none")
        self._record(len(examples))
        return self._ctx.gym.run_examples(examples)  # it applies short_results itself

    def _record(self, rows: int) -> None:
        self.calls += 1
        # A second call in one collection is NeMo RL re-running the whole batch: a retry.
        self._ctx.history.append(
            SOURCE,
            "info",
            "upstream" if self.calls == 1 else "retry",
            {"call": "RolloutCollectionHelper.run_examples", "rows": rows, "attempt": self.calls},
        )


# -- NeMo RL, as the tree has it ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trainer:
    """The NeMo RL code one collection drives, and which API generation it is."""

    actor_class: type
    remote_class: Any  # NemoGym as the tree declares it: the Ray actor class
    root: Path  # the folder holding the nemo_rl package
    caller: Callable[..., Any]
    rollouts: Any  # the nemo_rl.experience.rollouts module
    batch_class: type
    streaming: bool
    nan_retry_knob: bool  # NemoGym takes rollout_max_attempts_to_avoid_lp_nan (trees before #3000)

    def actor(self, helper: GymHelper, tokenizer: Any, settings: TrainerSettings) -> Any:
        """A ``NemoGym`` with what its spin-up sets, over our servers instead of starting its own."""
        cfg = nemo_rl_settings.actor_cfg(settings)
        actor: Any
        if hasattr(self.actor_class, "_spinup"):  # spin-up lives outside __init__: __init__ is safe
            actor = self.actor_class(cfg)
        else:  # __init__ is the spin-up (starts Gym servers): skipped, as NeMo RL's tests do
            actor = object.__new__(self.actor_class)
            actor.cfg = cfg
        spun_up(
            actor,
            rch=helper,
            head_server_config=helper.head_server_config,
            max_attempts=nemo_rl_settings.nan_retries(settings),
            tokenizer=tokenizer,
        )
        return actor

    def caller_call(
        self,
        ctx: CollectorContext,
        rows: Sequence[Row],
        handle: Any,
        tokenizer: Any,
        settings: TrainerSettings,
        *,
        extra: Mapping[str, Any] = MappingProxyType({}),
    ) -> Callable[[], Any]:
        """The caller bound to its arguments, as NeMo RL's GRPO loop calls it (``extra``: what the
        tree's ``grpo_train`` computes for it from its master config, ``nemo_rl_train_batch``)."""
        batch = input_batch(self.batch_class, rows)
        generation = nested(settings.items, "policy.generation")
        offered = {
            "policy_generation": SimpleNamespace(cfg={"vllm_cfg": generation.pop("vllm_cfg")}),
            "input_batch": batch,
            "tokenizer": tokenizer,
            "task_to_env": {"nemo_gym": handle},
            "generation_config": generation,
            "log_full_result_tables": False,
            **extra,
        }
        parameters = inspect.signature(self.caller).parameters
        kwargs = {name: value for name, value in offered.items() if name in parameters}
        unknown = [
            name
            for name, parameter in parameters.items()
            if name not in kwargs and parameter.default is inspect.Parameter.empty
        ]
        if unknown:
            raise CollectorTargetError(
                f"{self.caller.__module__}.{self.caller.__name__} needs {unknown}, which this adapter "
                "does not know how to give; this NeMo RL tree is newer than the adapter"
            )
        return lambda: self.caller(**kwargs)


def input_batch(batch_class: type, rows: Sequence[Row]) -> Any:
    """The caller's ``input_batch``: one datum per prompt, as NeMo RL's dataloader gives them,
    repeated per generation as ``grpo_train`` does (``batch.repeat_interleave(
    grpo.num_generations_per_prompt)``, each copy deep-copied); the workload's rows are each
    prompt's group, consecutively."""
    import torch

    size = group_size(rows, setting=GROUP_SIZE)
    prompts = rows[::size]
    batch: Any = batch_class(
        {
            # Rows travel as NeMo RL's dataset gives them: each its own dict, changed in place.
            "extra_env_info": [_copy_row(row) for row in prompts],
            "loss_multiplier": torch.ones(len(prompts)),
        }
    )
    return batch.repeat_interleave(size)


def load_trainer() -> Trainer:
    """NeMo RL's actor class and caller from the importable tree; which API they speak."""
    gym_module = importlib.import_module("nemo_rl.environments.nemo_gym")
    rollouts = importlib.import_module("nemo_rl.experience.rollouts")
    batches = importlib.import_module("nemo_rl.distributed.batched_data_dict")
    remote_class = gym_module.NemoGym
    metadata = getattr(remote_class, "__ray_metadata__", None)
    actor_class = metadata.modified_class if metadata is not None else remote_class
    caller = getattr(rollouts, "run_nemo_gym_rollout_sync", None) or rollouts.run_async_nemo_gym_rollout
    if inspect.iscoroutinefunction(caller) or inspect.isasyncgenfunction(caller):
        raise CollectorTargetError(
            f"{rollouts.__name__}.{caller.__name__} is async and there is no synchronous wrapper; "
            "this NeMo RL tree is newer than the adapter"
        )
    streaming = inspect.isasyncgenfunction(actor_class.run_rollouts)
    knob = nemo_rl_settings.NAN_RETRIES.rpartition(".")[2] in inspect.getsource(gym_module)
    root = Path(str(gym_module.__file__)).resolve().parents[2]  # <root>/nemo_rl/environments/nemo_gym.py
    return Trainer(
        actor_class, remote_class, root, caller, rollouts, batches.BatchedDataDict, streaming, knob
    )


def trainer_tokenizer(ctx: CollectorContext) -> Any:
    """A ``transformers`` tokenizer for the policy, as a trainer loads one from the model directory.

    The context carries the policy's ``tokenizers.Tokenizer``, not its directory: when it is the
    bundled model's, that directory is loaded (chat template included); otherwise the tokenizer
    is wrapped, its EOS the policy's and, as NeMo RL's ``get_tokenizer`` does for a tokenizer
    without one, its pad token the EOS.
    """
    transformers = importlib.import_module("transformers")
    if ctx.tokenizer is None:
        raise CollectorTargetError("the nemo_rl adapter needs the policy's tokenizer; the context has none")
    tiny = bundled.tiny_model_dir()
    if _same_tokenizer(ctx.tokenizer, tiny / "tokenizer.json"):
        return transformers.AutoTokenizer.from_pretrained(str(tiny))
    eos = next((ctx.tokenizer.id_to_token(token) for token in ctx.eos_token_ids), None)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=ctx.tokenizer, eos_token=eos, pad_token=eos)


def _same_tokenizer(tokenizer: Any, path: Path) -> bool:
    if not path.is_file() or not callable(getattr(tokenizer, "to_str", None)):
        return False
    from tokenizers import Tokenizer

    return bool(tokenizer.to_str() == Tokenizer.from_file(str(path)).to_str())


def _copy_row(row: Row) -> dict[str, Any]:
    return copy.deepcopy(dict(row))


@contextlib.contextmanager
def trainer_warnings() -> Iterator[None]:
    """NeMo RL's own warnings (a tensor copied with ``torch.tensor``, ...) stay warnings, as in a
    training run, even under a test suite's ``filterwarnings = error``: they are not its outcome."""
    with warnings.catch_warnings():
        warnings.filterwarnings("default", module=r"nemo_rl(\.|$)")
        yield
