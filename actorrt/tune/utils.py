"""Utilities for trainables (Ray's ``ray.tune.utils``)."""

from ._gpu_wait import wait_for_gpu as wait_for_gpu

__all__ = ["wait_for_gpu"]
