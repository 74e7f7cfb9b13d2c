"""What Tune writes per trial and per result, kept cheap without changing a byte of it:
result logs in their exact format, the journal synced off the controller's loop, and grid
configs that share nothing with the param space."""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from actorrt import tune
from actorrt.tune._controller._experiment_state import Journal, read_journal
from actorrt.tune._controller._storage import FLUSH_S, ExperimentStorage
from actorrt.tune.search import BasicVariantGenerator


def _result(i: int, **extra: Any) -> dict[str, Any]:
    return {"loss": 1.0 / (i + 1), "name": "ü,\"q\"", "nested": {"a": i, "b": [i]},
            "training_iteration": i + 1, "done": False, **extra}


def test_result_logs_are_one_json_line_and_one_csv_row_per_result(tmp_path: Path) -> None:
    storage = ExperimentStorage(str(tmp_path), "exp")
    trial = storage.trial_dir("train_abc_00000")
    config = {"lr": 0.1, "layers": {"n": 2}}
    results = [_result(i) for i in range(3)]
    for n, result in enumerate(results, 1):
        storage.append_result(trial, {**result, "config": config})
        # Each result reaches the file within FLUSH_S, written by the writer thread.
        deadline = time.monotonic() + FLUSH_S + 5.0
        while len(Path(trial, "result.json").read_bytes().splitlines()) < n:
            assert time.monotonic() < deadline, "a result was not written within FLUSH_S"
            time.sleep(0.005)
        lines = Path(trial, "result.json").read_bytes().splitlines()
        assert json.loads(lines[-1]) == {**result, "config": config}
    # What the sizes say is what the files hold once written (a checkpoint's cut points).
    sizes = storage.sizes(trial)
    storage.close_trial(trial)
    storage.flush()
    assert sizes == (Path(trial, "result.json").stat().st_size,
                     Path(trial, "progress.csv").stat().st_size)
    expected_json = "".join(json.dumps({**r, "config": config}) + "\n" for r in results)
    assert Path(trial, "result.json").read_text(encoding="utf-8") == expected_json
    header = ["loss", "name", "nested/a", "nested/b", "training_iteration", "done"]
    with open(os.path.join(trial, "progress.csv"), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == header
    assert rows[1:] == [
        [str(r["loss"]), r["name"], str(r["nested"]["a"]), str(r["nested"]["b"]),
         str(r["training_iteration"]), "False"] for r in results
    ]
    assert Path(trial, "progress.csv").read_bytes().count(b"\r") == 0

    # A resumed trial appends under the columns its file has, however its results change.
    storage.append_result(trial, {"extra": 1, **_result(3), "config": config})
    storage.close()
    with open(os.path.join(trial, "progress.csv"), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == header and len(rows) == 5 and rows[4][4] == "4"


def test_a_trial_end_is_synced_by_a_helper_thread_and_close_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    release = threading.Event()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(threading.current_thread().name)
        if threading.current_thread() is not threading.main_thread():
            assert release.wait(10)  # a slow disk: the caller must not wait for it
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    journal = Journal(str(tmp_path), fresh=True)
    journal.append("trial", id="t1")
    assert synced == []  # a plain line is flushed, never synced
    journal.append("end", durable_soon=True, id="t1", status="TERMINATED")
    journal.append("end", durable_soon=True, id="t2", status="TERMINATED")
    # Both lines are in the file at once, while their sync is still running.
    assert [e["event"] for e in read_journal(str(tmp_path))] == ["trial", "end", "end"]
    journal.append("checkpoint", durable=True, id="t3")
    assert threading.main_thread().name in synced  # a checkpoint is synced before it returns
    closing = threading.Thread(target=journal.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # close waits for the running sync
    release.set()
    closing.join(10)
    assert not closing.is_alive()
    helpers = [name for name in synced if name.startswith("actorrt-tune-journal-sync")]
    assert 1 <= len(helpers) <= 2  # the two ends: one sync, or two, never one each and more


def test_grid_configs_share_no_dict_or_list_with_the_space_or_each_other() -> None:
    points = [{"inner": [i, {"deep": i}]} for i in range(50)]
    space = {"g": tune.grid_search(points), "fixed": {"list": [1, 2]}, "u": tune.uniform(0, 1)}
    search = BasicVariantGenerator(random_state=1)
    search.set_search_properties(None, None, space, num_samples=1)
    configs = [search.suggest(str(i)) for i in range(50)]
    assert search.suggest("50") == BasicVariantGenerator.FINISHED
    assert [c["g"] for c in configs] == points  # type: ignore[index]
    for config in configs:
        assert isinstance(config, dict)
        config["g"]["inner"][1]["deep"] = -1
        config["fixed"]["list"].append(3)
    assert points == [{"inner": [i, {"deep": i}]} for i in range(50)]
    assert space["fixed"] == {"list": [1, 2]}
    assert space["g"] == {"grid_search": points}
