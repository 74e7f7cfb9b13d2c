"""The ``actorrt`` command: ``status``, ``results``, ``start``/``stop`` of a cluster,
``dashboard``, and what they read and print."""

from ._main import main as main

__all__ = ["main"]
