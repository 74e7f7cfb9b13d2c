"""The trial function the tracking integrations' tests sweep over ``lr``: three results
(``loss``, a nested ``acc``, a ``secret`` to leave out), a checkpoint with the last, and
an error for ``lr > 0.25``."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from actorrt import tune


def steps(config: dict[str, Any]) -> None:
    for i in range(3):
        checkpoint = None
        if i == 2:
            folder = Path(tempfile.mkdtemp())
            (folder / "weights.txt").write_text(str(config["lr"]))
            checkpoint = tune.Checkpoint.from_directory(str(folder))
        tune.report({"loss": config["lr"] * (3 - i), "nested": {"acc": i / 2}, "secret": 1},
                    checkpoint=checkpoint)
    if config["lr"] > 0.25:
        raise ValueError("this trial fails")
