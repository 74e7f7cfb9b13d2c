"""``actorrt.util.actor_pool.ActorPool``, at Ray's path (``ray.util.actor_pool``)."""

from .._runtime._actor_pool import ActorPool as ActorPool

__all__ = ["ActorPool"]

ActorPool.__module__ = "actorrt.util"
