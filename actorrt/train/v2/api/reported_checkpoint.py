"""Ray's ``ray.train.v2.api.reported_checkpoint``: ``ReportedCheckpoint``."""

from ... import ReportedCheckpoint as ReportedCheckpoint

__all__ = ["ReportedCheckpoint"]
