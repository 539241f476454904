"""The prompts ``DataProto`` the ``verl`` adapter hands the recipe's manager, built as a verl
trainer's dataloader builds it (the recipe's dataset class over the rows, verl's ``collate_fn``,
``DataProto.from_single_dict``), and in validation grouped by ``_validate``'s own lines before
generation; in train mode ``verl_train_batch`` runs ``fit``'s.
"""

from __future__ import annotations

import importlib
import json
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.collector.protocol import Row

DATASET_CLASSES: Final = ("NemoGymJSONLDataset", "NeMoGymJSONLDataset")
"""PR #80's names, then #87's (a rename; the collection code is the same)."""


def prompts_proto(recipe: Any, rows: Sequence[Row], tokenizer: Any, *, validate: bool) -> Any:
    """The prompts ``DataProto`` a verl trainer reads from its dataloader: the recipe's dataset over
    the rows (one per prompt) as JSONL, verl's ``collate_fn``, ``DataProto.from_single_dict``, and
    the step's meta_info. The recipe numbers the repeated rows' ``_rowidx`` by position."""
    dataset_module: Any = importlib.import_module(recipe.__name__.rpartition(".")[0] + ".dataset")
    protocol: Any = importlib.import_module("verl.protocol")
    with tempfile.TemporaryDirectory(prefix="rollout-chaos-verl-") as folder:
        path = Path(folder) / "rows.jsonl"
        path.write_text("".join(json.dumps(dict(row)) + "\n" for row in rows), encoding="utf-8")
        dataset = recipe_class(dataset_module, DATASET_CLASSES)(str(path), tokenizer)
        items = [dataset[index] for index in range(len(dataset))]
    prompts = protocol.DataProto.from_single_dict(dataset.collate_fn(items))
    prompts.meta_info.update({"validate": validate, "global_steps": 0})
    return prompts


def validation_groups(prompts: Any, *, n: int) -> Any:
    """``_validate``'s lines before generation: a ``uid`` per prompt, then
    ``repeat(repeat_times=val_kwargs.n, interleave=True)``, so each prompt's group is consecutive,
    as the workload lays its rows out."""
    numpy: Any = importlib.import_module("numpy")
    prompts.non_tensor_batch["uid"] = numpy.array(
        [str(uuid.uuid4()) for _ in range(len(prompts))], dtype=object
    )
    return prompts.repeat(repeat_times=n, interleave=True)


def recipe_class(module: Any, names: Sequence[str]) -> Any:
    """The first of ``names`` that ``module`` defines."""
    for name in names:
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"{module.__name__} defines none of {', '.join(names)}")
