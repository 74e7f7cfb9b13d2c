"""Ray's checkpoint metadata: a small JSON dict kept in a checkpoint's folder."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["METADATA_FILE", "CheckpointMetadata"]

METADATA_FILE = ".metadata.json"


class CheckpointMetadata:
    """``get_metadata`` / ``set_metadata`` / ``update_metadata`` for a checkpoint class
    whose instances have a ``path`` folder (Ray's ``Checkpoint`` methods)."""

    __slots__ = ()
    path: str

    def get_metadata(self) -> dict[str, Any]:
        """The checkpoint's metadata (``{}`` if none was set)."""
        file = os.path.join(self.path, METADATA_FILE)
        if not os.path.exists(file):
            return {}
        with open(file) as f:
            loaded: dict[str, Any] = json.load(f)
        return loaded

    def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Replace the metadata with ``metadata`` (a JSON-serialisable dict), stored in the
        checkpoint's folder so it travels with the files (through ``train.report`` too).

        Raises:
            TypeError: ``metadata`` is not a dict, or not JSON-serialisable.
        """
        if not isinstance(metadata, Mapping):
            raise TypeError(f"checkpoint metadata must be a dict, got {metadata!r}")
        try:
            text = json.dumps(dict(metadata))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"checkpoint metadata must be JSON-serialisable: {exc}") from None
        with open(os.path.join(self.path, METADATA_FILE), "w") as f:
            f.write(text)

    def update_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Merge ``metadata`` into the existing metadata."""
        if not isinstance(metadata, Mapping):
            raise TypeError(f"checkpoint metadata must be a dict, got {metadata!r}")
        self.set_metadata({**self.get_metadata(), **metadata})
