"""The benchmark suite's driver cannot rot: a tiny end-to-end run (no Ray), its `--check`
logic, its plots, and the bounds and /proc sweep that keep Ray's turns from hanging."""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `python -m pytest` has it; a bare `pytest` may not
    sys.path.insert(0, str(ROOT))

from benchmarks import _table, plots, suite  # noqa: E402
from benchmarks._common import Figure, machine  # noqa: E402
from benchmarks._turns import MARKER, marked_pids, run_bounded, sweep_marked  # noqa: E402


@pytest.mark.timeout(90)
def test_quick_suite_writes_table_json_and_plots(tmp_path: Path) -> None:
    env = os.environ | {"ACTORRT_BENCH_RESULTS": str(tmp_path / "modules")}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.suite", "--quick", "--reps", "2",
         "--only", "core,broker_sim", "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=80,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads((tmp_path / "latest.json").read_text())
    assert not data["failures"]
    assert {"cpus", "cpu_model", "python", "event_loop", "commit", "date"} <= set(data["machine"])
    figures = {f["name"]: f for f in data["figures"]}
    tell = figures["inline tell"]
    assert len(tell["samples"]) == 2 and len(tell["baseline_samples"]) == 2
    assert tell["min"] <= tell["median"] <= tell["max"] and tell["ratio"] > 0
    assert tell["target_source"] == "§8" and tell["met"] in (True, False)
    assert figures["pure broker reserve+release, 2 x {CPU: 1}"]["target_source"] == "module"
    assert set(data["curves"]) >= {"decision_vs_pending", "request_release_vs_nodes"}
    assert data["plots"] == ["scaling_broker.png"]
    assert (tmp_path / "scaling_broker.png").stat().st_size > 10_000
    table = (tmp_path / "latest.md").read_text()
    assert "| inline tell (msgs/s) |" in table and "Python" in table and "uvloop" in table
    assert not list(tmp_path.glob("modules/*"))  # the modules' own JSON went to scratch


def _module_json(name: str, samples: list[float], base: list[float]) -> dict[str, object]:
    figure = {"name": name, "unit": "msgs/s", "samples": samples, "baseline_samples": base,
              "target_ratio": 0.5, "target_value": None, "lower_is_better": False}
    return {"figures": [figure], "machine": {"loop": "uvloop"}}


def _run(tmp_path: Path, samples: list[float]) -> suite.Run:
    args = argparse.Namespace(quick=False, reps=None, ray=False, only="core", no_plots=True,
                              check=True)
    run = suite.Run(args, scratch=tmp_path)
    # Two turns of one module: their samples pool.
    run.turns["core"] = [_module_json("inline tell", samples[:1], [100.0]),
                         _module_json("inline tell", samples[1:], [100.0])]
    run.sections["core"] = {"seconds": 1.0, "reps": 2}
    return run


def test_a_missed_design_target_fails_the_check(tmp_path: Path) -> None:
    info = machine()
    assert suite.write(_run(tmp_path, [60.0, 70.0]), info, 1.0, tmp_path / "met")
    assert not suite.write(_run(tmp_path, [30.0, 40.0]), info, 1.0, tmp_path / "missed")
    data = json.loads((tmp_path / "missed" / "latest.json").read_text())
    assert data["design_targets_missed"] == ["inline tell (msgs/s)"] and not data["ok"]
    [row] = data["figures"]
    assert row["samples"] == [30.0, 40.0] and row["ratio"] == pytest.approx(0.35)
    assert "**MISSED**" in (tmp_path / "missed" / "latest.md").read_text()


def test_rows_compare_with_ray_as_speed() -> None:
    rate = _table.Row("actors", "processes", Figure("x", "calls/s", [900.0]),
                      _table.Spec("x", "§8", "sequential calls/s"), ray_values=[300.0])
    seconds = _table.Row("tune", "tune_overhead",
                         Figure("t", "s", [2.0], lower_is_better=True),
                         _table.Spec("t", "§8", "tune seconds"), ray_values=[120.0])
    assert rate.vs_ray == pytest.approx(3.0) and seconds.vs_ray == pytest.approx(60.0)


def test_plots_draw_the_ask_and_tune_curves(tmp_path: Path) -> None:
    # The broker's plot is drawn by the quick suite run above.
    x = [1, 2, 4, 8]
    ask = {"x": x, "x_label": "concurrent callers", "unit": "asks/s",
           "series": {"1 actor": [1e3, 2e3, 3e3, 3.5e3], "2 actors": [1e3, 2.1e3, 4e3, 6e3]}}
    curves = {
        "ask_inline": ask, "ask_process": ask,
        "tune_vs_trials": {"x": [10, 100], "x_label": "trials", "unit": "s", "reports": 10,
                           "series": {"actorrt Tuner.fit": [0.5, 2.5],
                                      "process pool floor": [0.1, 0.2]}},
    }
    made = plots.draw(curves, tmp_path, "test", ray_tune_s=120.0)
    assert sorted(p.name for p in made) == ["scaling_ask.png", "scaling_tune.png"]


def test_a_turn_past_its_bound_is_killed_with_its_group() -> None:
    token = uuid.uuid4().hex
    env = os.environ | {MARKER: token}
    start = time.monotonic()
    turn = run_bounded(["bash", "-c", "sleep 60 & sleep 60"], timeout=0.5, env=env)
    assert turn.timed_out and not turn.ok and time.monotonic() - start < 20
    assert not marked_pids(token)  # the background sleep went with the group


def test_the_sweep_finds_and_kills_a_marked_process_in_another_session() -> None:
    token = uuid.uuid4().hex
    proc = subprocess.Popen(["sleep", "60"], env=os.environ | {MARKER: token},
                            start_new_session=True)
    try:
        # The new process's environment is readable once it has started; poll for it.
        assert wait_until(lambda: list(marked_pids(token)) == [proc.pid], timeout=10)
        killed = sweep_marked(token, grace=0.2)
        assert list(killed) == [str(proc.pid)] and "sleep" in killed[str(proc.pid)]
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_ray_script_parses_without_ray() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ray_side.py"), "--help"],
                          capture_output=True, text=True, timeout=30, check=True)
    assert "actors" in done.stdout and "deadlock" in done.stdout


def test_a_missing_interpreter_is_a_failed_turn_not_a_crash() -> None:
    turn = run_bounded(["/nonexistent/python", "-V"], timeout=5)
    assert not turn.ok and turn.rc is None and "nonexistent" in turn.stderr
