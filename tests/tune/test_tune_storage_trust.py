"""An experiment folder that another local user could have planted or can change is refused.

``Tuner.restore`` unpickles ``tuner.pkl``, the journal's configs and ``params.pkl``: whoever
can write them runs code as the user who restores. So ``Tuner(storage_path, name)``,
``Tuner.restore``, ``tune.run(resume=...)`` and ``actorrt results`` refuse an experiment
folder (or a trial folder in it) that is a link, belongs to another user, or is writable by
others, before they open anything in it. The tests plant such folders as another user would
(they run as root here: ``os.chown`` to uid 65534 stands in for that user) with a pickle
that, once loaded, makes a marker folder: the marker must never appear.
"""

from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actorrt import tune
from actorrt.tune._controller._experiment_state import (
    HEADER_FILE,
    JOURNAL_FILE,
    read_header,
)

OTHER_UID = 65534  # nobody

needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="planting a folder owned by another user takes root (os.chown)",
)


def train(config: dict[str, Any]) -> None:
    tune.report({"x": config.get("x", 0)})


class Payload:
    """Unpickling it makes the folder ``marker``: proof that a planted pickle ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (self.marker,))


def plant_pickle(path: Path, marker: Path) -> None:
    path.write_bytes(pickle.dumps(Payload(str(marker))))


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A folder every user may write, like /tmp (mode 1777)."""
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o1777)
    return folder


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def plant_experiment(shared: Path, kind: str, marker: Path) -> Path:
    """``shared/exp`` as another user leaves it: a link to their folder, their own folder,
    or a folder anyone may write; each with a tuner.pkl that runs code when loaded."""
    target = shared / "exp"
    folder = shared / "theirs" if kind == "link" else target
    folder.mkdir()
    plant_pickle(folder / HEADER_FILE, marker)
    (folder / JOURNAL_FILE).write_text('{"event": "start", "t": 0}\n')
    trial = folder / "train_00000"
    trial.mkdir()
    (trial / "params.json").write_text("{}")
    (trial / "result.json").write_text('{"x": 1}\n')
    if kind == "link":
        os.symlink(folder, target)
    if kind in ("link", "other user's"):
        for path in (folder, folder / HEADER_FILE, trial):
            os.chown(path, OTHER_UID, OTHER_UID)
        os.chmod(folder, 0o755)
    else:
        os.chmod(folder, 0o777)
    return target


def results_cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actorrt", "results", str(path)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip


@needs_root
@pytest.mark.parametrize("kind", ["link", "other user's", "writable by others"])
def test_a_planted_experiment_folder_is_refused_before_anything_is_unpickled(
    shared: Path, tmp_path: Path, kind: str
) -> None:
    marker = tmp_path / "pickle-ran"
    path = plant_experiment(shared, kind, marker)
    why = {
        "link": "is a symbolic link",
        "other user's": f"belongs to uid {OTHER_UID}",
        "writable by others": "other users may write it",
    }[kind]
    run_config = tune.RunConfig(storage_path=str(shared), name="exp", verbose=0)
    with pytest.raises(PermissionError, match=why) as info:
        tune.Tuner(train, run_config=run_config)
    assert repr(str(path)) in str(info.value)
    with pytest.raises(PermissionError, match=why):
        tune.Tuner.restore(str(path), train)
    with pytest.raises(PermissionError, match=why):
        tune.run(train, name="exp", storage_path=str(shared), resume=True, verbose=0)
    done = results_cli(path)
    assert done.returncode == 2, done
    assert why in done.stderr and str(path) in done.stderr
    assert not marker.exists(), "a planted pickle was loaded"
    if kind != "link":
        assert os.lstat(path).st_uid == (OTHER_UID if kind == "other user's" else 0)


@needs_root
def test_a_trial_folder_of_another_user_is_refused_before_its_config_is_unpickled(
    tmp_path: Path,
) -> None:
    run_config = tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0)
    tune.Tuner(train, param_space={"x": 1}, run_config=run_config)
    experiment = tmp_path / "exp"
    tag = read_header(str(experiment)).tag
    # A trial folder the journal does not name: a restore recovers it from params.pkl.
    trial = experiment / f"train_{tag}_00000"
    trial.mkdir()
    marker = tmp_path / "pickle-ran"
    plant_pickle(trial / "params.pkl", marker)
    (trial / "params.json").write_text('{"x": 1}')
    os.chown(trial, OTHER_UID, OTHER_UID)
    with pytest.raises(PermissionError, match=rf"trial folder .*{trial.name}.* belongs to uid"):
        tune.Tuner.restore(str(experiment), train)
    assert not marker.exists(), "a planted params.pkl was loaded"
    done = results_cli(experiment)
    assert done.returncode == 2 and f"belongs to uid {OTHER_UID}" in done.stderr, done


@needs_root
def test_a_planted_header_file_in_an_own_folder_is_refused(tmp_path: Path) -> None:
    """The folder is ours, but its tuner.pkl was swapped for another user's file (or a
    link): the file itself is checked as it is opened, so it is never loaded."""
    run_config = tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0)
    tune.Tuner(train, run_config=run_config)
    header = tmp_path / "exp" / HEADER_FILE
    marker = tmp_path / "pickle-ran"
    plant_pickle(header, marker)
    os.chown(header, OTHER_UID, OTHER_UID)
    with pytest.raises(PermissionError, match="experiment header .* belongs to uid"):
        tune.Tuner.restore(str(tmp_path / "exp"), train)
    elsewhere = tmp_path / "elsewhere.pkl"
    plant_pickle(elsewhere, marker)
    header.unlink()
    os.symlink(elsewhere, header)
    with pytest.raises(PermissionError, match="experiment header .* is a symbolic link"):
        tune.Tuner.restore(str(tmp_path / "exp"), train)
    assert not marker.exists()


@pytest.mark.usefixtures("loose_umask")
def test_new_experiment_folders_are_not_writable_by_others_whatever_the_umask(
    tmp_path: Path,
) -> None:
    storage = tmp_path / "a" / "results"
    run_config = tune.RunConfig(storage_path=str(storage), name="exp", verbose=0)
    tune.Tuner(train, run_config=run_config)
    modes = {
        p: stat.S_IMODE(os.lstat(p).st_mode) for p in (tmp_path / "a", storage, storage / "exp")
    }
    assert modes[storage / "exp"] == 0o700
    assert all(not mode & 0o022 for mode in modes.values()), modes
