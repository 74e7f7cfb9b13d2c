"""The cluster benchmark runs end to end, on three network-namespace hosts where they can be
made and on loopback (tiny sizes; its targets are `--check`'s business), and the suite's
`--check` fails on a missed cluster target."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `python -m pytest` has it; a bare `pytest` may not
    sys.path.insert(0, str(ROOT))

from benchmarks import suite  # noqa: E402
from benchmarks._common import machine  # noqa: E402

FIGURES = {
    "cross-node ask, sequential",
    "cross-node ask, sequential, vs TLS echo",
    "cross-node ask, sequential, vs cross-process",
    "cross-node ask, sequential, async method",
    "cross-node calls, pipelined 1000",
    "cross-node calls, pipelined 1000, vs TLS echo",
    "cross-node calls, pipelined 1000, vs cross-process",
    "cross-node actor -> actor ask, sequential",
    "cross-node actor -> actor ask, sequential, through the driver",
    "cross-node actor -> actor ask, direct vs through the driver",
    "raw TCP echo, sequential, host 0 worker to host 1",
    "placement group STRICT_SPREAD 3 x {CPU: 1}, 3 nodes",
    "Tune 6 trials x 3 reports, {CPU: 1}, 3 nodes",
    "node loss, SIGKILL: pending ask to ActorDiedError",
    "node loss, link cut: pending ask to ActorDiedError",
    "raw TCP echo, sequential",
    "raw TCP echo, pipelined window 1000",
    "raw TLS echo, sequential",
    "raw TLS echo, pipelined window 1000",
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("loopback", [False, True], ids=["namespaces", "loopback"])
def test_cluster_benchmark_runs_and_writes_json(tmp_path: Path, loopback: bool) -> None:
    env = os.environ | {"ACTORRT_BENCH_RESULTS": str(tmp_path)}
    argv = [sys.executable, "-m", "benchmarks.cluster", "--quick"]
    done = subprocess.run(argv + (["--loopback"] if loopback else []), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "checked against the plain TCP echo" in out
    data = json.loads((tmp_path / "cluster.json").read_text())
    details = data["machine"]
    if loopback:
        assert details["loopback"] and "asked for (--loopback)" in details["mode"]
    if details["loopback"]:  # said so, in the output and in the suite's header note
        assert "loopback: every member a separate process on 127.0.0.1" in out
        assert "SIGSTOP" in details["suite_note"]
    else:
        assert "network namespaces on a bridge" in out and "namespaces" in details["suite_note"]
    figures = {f["name"]: f for f in data["figures"]}
    assert set(figures) == FIGURES
    for name in FIGURES - {n for n in FIGURES if n.startswith(("raw", "node loss"))}:
        assert figures[name]["baseline_median"] > 0 and figures[name]["ratio"] > 0, name
    for name in ("cross-node ask, sequential", "cross-node calls, pipelined 1000"):
        assert figures[name]["met"] in (True, False)
    assert figures["cross-node ask, sequential"]["target_ratio"] == 0.60
    assert figures["cross-node calls, pipelined 1000"]["target_ratio"] == 0.30
    for how in ("SIGKILL", "link cut"):
        loss = figures[f"node loss, {how}: pending ask to ActorDiedError"]
        assert loss["target_value"] == 3.0 and loss["lower_is_better"]
        assert 0 < loss["median"] < 30, loss  # 30 s: the bound of an ask that never failed
    assert details["loss_reasons"] == {"kill": ["node lost"], "cut": ["node lost"]}


def _turn(name: str, samples: list[float], target: float) -> dict[str, object]:
    figure = {"name": name, "unit": "s", "samples": samples, "baseline_samples": [],
              "target_ratio": None, "target_value": target, "lower_is_better": True}
    return {"figures": [figure], "machine": {"loop": "uvloop", "suite_note": "cluster: test"}}


def test_a_missed_cluster_target_fails_the_check(tmp_path: Path) -> None:
    args = argparse.Namespace(quick=False, reps=None, ray=False, only="cluster",
                              no_plots=True, check=True)
    name = "node loss, link cut: pending ask to ActorDiedError"
    info = machine()
    for samples, met in (([2.1, 2.3], True), ([3.5, 4.0], False)):
        run = suite.Run(args, scratch=tmp_path)
        run.turns["cluster"] = [_turn(name, samples, 3.0)]
        run.sections["cluster"] = {"seconds": 1.0, "reps": 2}
        out = tmp_path / str(met)
        assert suite.write(run, info, 1.0, out) is met
        data = json.loads((out / "latest.json").read_text())
        [row] = data["figures"]
        assert row["target_source"] == "cluster" and row["met"] is met
        assert data["design_targets_missed"] == ([] if met else [row["label"]])
        table = (out / "latest.md").read_text()
        assert "- cluster: test" in table  # the module's note heads the table
        assert ("**MISSED**" in table) is not met
