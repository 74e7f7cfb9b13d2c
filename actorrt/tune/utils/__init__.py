"""Utilities for trainables (Ray's ``ray.tune.utils``)."""

from ._gpu_wait import wait_for_gpu as wait_for_gpu
from .util import diagnose_serialization as diagnose_serialization
from .util import validate_save_restore as validate_save_restore

__all__ = ["diagnose_serialization", "validate_save_restore", "wait_for_gpu"]
