"""Ray's ``ray.train.v2.api.train_fn_utils``: what a training function calls."""

from ... import get_all_reported_checkpoints as get_all_reported_checkpoints
from ... import get_checkpoint as get_checkpoint
from ... import get_context as get_context
from ... import get_dataset_shard as get_dataset_shard
from ... import report as report

__all__ = [
    "get_all_reported_checkpoints", "get_checkpoint", "get_context", "get_dataset_shard",
    "report",
]
