"""Utilities for trainables (Ray's ``ray.tune.utils``)."""

from ._diagnose import diagnose_serialization as diagnose_serialization
from ._diagnose import validate_save_restore as validate_save_restore
from ._gpu_wait import wait_for_gpu as wait_for_gpu

__all__ = ["diagnose_serialization", "validate_save_restore", "wait_for_gpu"]
