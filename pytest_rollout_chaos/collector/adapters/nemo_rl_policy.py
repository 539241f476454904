"""The policy's own logprobs, where ``grpo_train`` asks NeMo RL's ``Policy`` for them.

Before it computes advantages, ``grpo_train`` has the policy score the batch it generated:
``policy.get_logprobs(logprob_data)["logprobs"]`` becomes ``train_data["prev_logprobs"]``, which
``compute_and_apply_seq_logprob_error_masking`` compares with the generation logprobs
(``grpo.seq_logprob_error_threshold``: a sequence whose mean ``exp(|error|)`` exceeds it is
masked out of the loss). NeMo RL's workers (DTensor or Megatron, under Ray, on GPUs) are not run:
``PolicyLogprobs`` loads the policy's weights from the stack's model directory with
``transformers`` (``AutoModelForCausalLM``, as NeMo RL's DTensor worker loads a model), once per
collector, on the CPU in eval mode, and scores each sequence in one teacher-forced forward pass,
as the worker's ``get_logprobs`` does without sequence packing
(``nemo_rl/models/policy/workers/dtensor_policy_worker.py`` at 3eebe4da): an all-ones attention
mask over the right-padded batch, the logits divided by the generation temperature, ``log_softmax``
in float32, the logprob of token ``t`` read at position ``t - 1``, a 0 prepended for the first
token (NeMo RL's convention: position ``i`` holds the logprob of input token ``i``), and every
position past a row's length zeroed.

What remains stood in (``STOOD_IN``): the workers themselves (the forward runs here, in float32,
not under their bfloat16 autocast); the reference policy, which at a run's first step is the
same initial weights, so ``get_reference_policy_logprobs`` scores with the same model.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.errors import CollectorTargetError

STOOD_IN: Final = (
    "policy.get_logprobs (NeMo RL's DTensor/Megatron workers): the policy's weights from the stack's "
    "model directory, loaded with transformers on the CPU, score each sequence in one teacher-forced "
    "forward pass in float32 (not under the workers' bfloat16 autocast), as the DTensor worker's "
    "get_logprobs does without sequence packing",
    "policy.get_reference_policy_logprobs: the same model, since at a run's first step the reference "
    "policy is the initial weights the policy serves",
)
"""What stands in for NeMo RL's policy workers where ``grpo_train`` asks them for logprobs."""


class PolicyLogprobs:
    """NeMo RL's ``Policy`` as far as ``grpo_train``'s logprob calls go: the policy's own model."""

    def __init__(self, model_dir: Path, *, temperature: float = 1.0) -> None:
        torch = importlib.import_module("torch")
        transformers = importlib.import_module("transformers")
        self.model_dir = model_dir
        self.temperature = temperature
        model = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self._model = model.to("cpu").eval()

    def get_logprobs(self, data: Any, timer: Any = None) -> dict[str, Any]:
        """``{"logprobs": [batch, sequence]}``: input token ``i``'s logprob at position ``i``, 0 at
        the first position and past each row's ``input_lengths``."""
        return {"logprobs": self.score(data["input_ids"], data["input_lengths"])}

    def get_reference_policy_logprobs(self, data: Any, timer: Any = None) -> dict[str, Any]:
        """``{"reference_logprobs": ...}``: the initial weights, which are the policy's at step one."""
        return {"reference_logprobs": self.score(data["input_ids"], data["input_lengths"])}

    def score(self, input_ids: Any, input_lengths: Any) -> Any:
        """The logprobs of ``input_ids`` (right-padded, ``[batch, sequence]``) under the model."""
        torch = importlib.import_module("torch")
        ids = torch.as_tensor(input_ids, dtype=torch.long).cpu()
        lengths = torch.as_tensor(input_lengths, dtype=torch.long).cpu()
        batch, seq_len = ids.shape
        with torch.no_grad():
            logits = self._model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids, dtype=torch.bool),
                position_ids=torch.arange(seq_len).repeat(batch, 1),
                use_cache=False,
            ).logits.to(torch.float32)
            if self.temperature != 1.0:
                logits = logits / self.temperature
            log_probs = torch.nn.functional.log_softmax(logits, dim=-1)[:, :-1]
            token_logprobs = log_probs.gather(dim=-1, index=ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            token_logprobs = torch.cat([torch.zeros_like(token_logprobs[:, :1]), token_logprobs], dim=1)
            inside = torch.arange(seq_len).unsqueeze(0) < lengths.unsqueeze(1)
            return token_logprobs * inside


def load(model_dir: Path | None, *, temperature: float) -> PolicyLogprobs:
    """The policy's model from the stack's model directory; a ``CollectorTargetError`` without one."""
    if model_dir is None or not (model_dir / "config.json").is_file():
        raise CollectorTargetError(
            f"the nemo_rl adapter computes grpo_train's prev_logprobs with the policy's own weights, "
            f"but the collector context names no model directory with a config.json ({model_dir})"
        )
    return PolicyLogprobs(model_dir, temperature=temperature)
