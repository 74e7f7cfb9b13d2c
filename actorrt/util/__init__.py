"""Ray's ``ray.util`` names that actorrt has: ``ActorPool`` (placement groups are
``actorrt.placement_group``)."""

from .. import placement_group as placement_group
from .actor_pool import ActorPool as ActorPool

__all__ = ["ActorPool", "placement_group"]


def __getattr__(name: str) -> object:
    # A ray.util name actorrt does not have: say so, and what to write instead.
    from .._ray_names import missing

    raise missing(__name__, name)
