"""Ray's ``ray.train.v2.api.data_parallel_trainer``: ``DataParallelTrainer``."""

from ... import DataParallelTrainer as DataParallelTrainer

__all__ = ["DataParallelTrainer"]
