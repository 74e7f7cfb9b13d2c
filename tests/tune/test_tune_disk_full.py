"""A sweep whose disk fills up ends with the error of the write that failed: which file,
what was being done, and that the disk is full; no callback is blamed for it.

The sweep writes to a tiny tmpfs mounted for the test (it runs as root here); where
mounting is not allowed the test is skipped, saying why.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import tune


def train(config: dict[str, Any]) -> None:
    for i in range(400):
        tune.report({"i": i, "pad": "x" * 4000})


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(mount)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        with contextlib.suppress(OSError):
            subprocess.run(["umount", "-l", str(mount)], check=True, capture_output=True)


@pytest.mark.actorrt(num_cpus=2)
async def test_a_full_disk_is_named_with_the_file_that_could_not_be_written(
    actorrt_runtime: actorrt.Runtime, tiny_disk: Path
) -> None:
    tuner = tune.Tuner(
        train,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(storage_path=str(tiny_disk), name="exp", verbose=0),
    )
    with pytest.raises(OSError) as info:
        await tuner.fit_async()
    error = info.value
    text = "".join(traceback.format_exception(error))
    assert error.errno == 28, text
    message = str(error)
    assert "tune could not " in message and f"{tiny_disk}{os.sep}exp{os.sep}" in message, text
    assert "the disk is full" in message, text
    assert "TBXLoggerCallback" not in text and "callback" not in " ".join(
        getattr(error, "__notes__", [])
    ), text
