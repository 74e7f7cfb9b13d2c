"""Ray's ``ray.train.v2.api.callback``: ``UserCallback``, the hooks of a run."""

from ... import UserCallback as UserCallback

__all__ = ["UserCallback"]
