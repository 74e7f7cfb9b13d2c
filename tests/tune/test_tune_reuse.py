"""Worker processes are reused across trials whose environment matches, so a trainable's
module (and what it imports) is imported once per process, not once per trial."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import pytest

import actorrt
from actorrt import tune

# A trainable's module whose import leaves a mark: one line per import, one file per process.
MODULE = """
import os

with open(os.path.join({marks!r}, f"imported_in.{{os.getpid()}}"), "a") as f:
    f.write("imported\\n")

from actorrt import tune


def train(config):
    tune.report({{"pid": os.getpid(), "x": config["x"]}})
"""


@pytest.mark.actorrt(num_cpus=2)
async def test_trials_share_worker_processes_and_their_imports(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, marks = tmp_path / "code", tmp_path / "marks"
    code.mkdir()
    marks.mkdir()
    (code / "marked_trainable.py").write_text(MODULE.format(marks=str(marks)))
    monkeypatch.syspath_prepend(str(code))  # workers start with the driver's sys.path
    try:
        module = importlib.import_module("marked_trainable")
        grid = await tune.Tuner(
            module.train,  # pickled by reference: each worker imports the module
            param_space={"x": tune.grid_search(list(range(12)))},
            run_config=tune.RunConfig(storage_path=str(tmp_path / "results"), verbose=0),
        ).fit_async()
    finally:
        sys.modules.pop("marked_trainable", None)
    assert len(grid) == 12 and not grid.errors
    pids = {r.metrics["pid"] for r in grid}
    # Two run at a time on two CPUs; a trial that ends hands its process to the next.
    assert len(pids) <= 3, pids
    imported = {
        int(name.rsplit(".", 1)[1]): (marks / name).read_text() for name in os.listdir(marks)
    }
    assert set(imported) == pids | {os.getpid()}  # the workers that ran trials, the driver
    assert all(text == "imported\n" for text in imported.values()), imported
