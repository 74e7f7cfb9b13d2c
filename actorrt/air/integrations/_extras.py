"""The optional libraries an integration drives (``actorrt.train._extras``'s ``require``)."""

from ...train._extras import require as require

__all__ = ["require"]
