"""The actor whose code is running now, for parents, wait edges and ``get_context()``."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._cell import ActorCell

# Set once at the start of each actor incarnation's task; tasks it creates inherit it.
current_cell: ContextVar[ActorCell | None] = ContextVar("actorrt_current_actor", default=None)


class RuntimeContext:
    """What code can learn about where it runs (``actorrt.get_context()``).

    Attributes:
        actor_id: the id of the actor running this code, or ``None`` in the driver program.
        actor_name: its registered name, or ``None``.
        actor_class: its class name, or ``None``.
        restart_count: how many times it has been restarted.
    """

    __slots__ = ("actor_class", "actor_id", "actor_name", "restart_count")

    def __init__(
        self,
        actor_id: str | None,
        actor_name: str | None,
        actor_class: str | None,
        restart_count: int,
    ) -> None:
        self.actor_id = actor_id
        self.actor_name = actor_name
        self.actor_class = actor_class
        self.restart_count = restart_count

    def get_actor_id(self) -> str | None:
        """The id of the current actor (Ray's spelling)."""
        return self.actor_id

    def __repr__(self) -> str:
        fields: dict[str, Any] = {
            "actor_id": self.actor_id,
            "actor_name": self.actor_name,
            "actor_class": self.actor_class,
            "restart_count": self.restart_count,
        }
        inner = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"actorrt.RuntimeContext({inner})"


def get_context() -> RuntimeContext:
    """Describe the actor whose code calls this (or the driver program)."""
    cell = current_cell.get()
    if cell is None:
        return RuntimeContext(None, None, None, 0)
    return RuntimeContext(cell.actor_id, cell.name, cell.cls_name, cell.restart_count)
