"""Every benchmark in one run: the targets table (docs/benchmarks.md), its plots, and
(``--ray``) Ray's column.

    python -m benchmarks.suite [--reps N] [--quick] [--check] [--ray] [--only a,b]
                               [--ray-python PATH] [--ray-reps N] [--ray-wait S] [--out DIR]

Sections, in order (``--only`` picks some): core, wire, actors (``benchmarks.processes`` and
``benchmarks.broker``), broker_sim, tune (``benchmarks.tune_overhead --large``), dashboard,
deadlock, train, scaling, cluster (three nodes in network namespaces, or on loopback where
they cannot be made). Each benchmark module runs as a subprocess in a session of its own, under a
hard time bound, with its results pointed at a scratch folder; the suite reads its JSON,
pools the samples of its turns, and writes:

- ``RESULTS/latest.json``: the machine, every figure (samples, median, min, max, same-run
  baseline, ratio, target, met), Ray's figures, the curves, the plots;
- ``RESULTS/latest.md``: the same as a Markdown table;
- ``RESULTS/scaling_*.png``: the curves (see ``benchmarks.plots``).

``RESULTS`` is ``benchmarks/results`` or ``$ACTORRT_BENCH_RESULTS`` (``--out`` overrides).
Every figure is measured in this run, beside its baseline measured in the same turn.

``--ray`` runs the same workloads on Ray 2.60 (``benchmarks/ray_side.py`` with the Ray
virtualenv's interpreter, default ``.venv-ray/bin/python``; ``make bench-ray`` creates it),
alternating with actorrt: actorrt's turn, then Ray's, then actorrt's ... Each Ray turn is a
fresh ``ray.init`` in its own subprocess under a hard bound; after it, every process it
started is gone (found by an environment marker in ``/proc``, killed if it lingers) before
the next turn starts. The cheap actor workloads get ``--ray-reps`` Ray turns; Tune and the
deadlock case one each (Ray's Tune sweep takes about two minutes here; the deadlock case
waits ``--ray-wait`` seconds for an answer that does not come).

Exit status: 1 when a benchmark turn failed, or with ``--check`` when a project target (§8)
or a cluster-mode target was missed; else 0. Other targets (a module's own, the deadlock
report's) are shown, never fatal.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _table
from ._common import RESULTS, ROOT, machine
from ._turns import MARKER, Turn, run_bounded, sweep_marked

RAY_PYTHON = ROOT / ".venv-ray" / "bin" / "python"
RAY_SCRIPT = ROOT / "benchmarks" / "ray_side.py"
MACHINE_KEYS = {  # what report() adds beside a module's own details
    "cpus", "affinity", "cpu_model", "memory_gib", "load_average", "python", "platform",
    "event_loop", "commit", "date"}


@dataclass
class Module:
    name: str  # benchmarks.<name>
    args: list[str] = field(default_factory=list)
    quick: list[str] = field(default_factory=list)
    reps_flag: bool = True  # takes --reps


@dataclass
class Section:
    name: str
    modules: list[Module]
    reps: int
    timeout: float  # seconds, per module turn
    ray: str | None = None  # a workload of ray_side.py, run between actorrt's turns
    ray_args: list[str] = field(default_factory=list)
    ray_quick: list[str] = field(default_factory=list)
    ray_reps: int | None = None  # None: --ray-reps
    ray_timeout: float = 600


SECTIONS = [
    Section("core", [Module("core", ["--n", "100000"],
                            ["--n", "5000", "--scale", "10000"])], reps=5, timeout=300),
    Section("wire", [Module("wire", ["--n-seq", "3000", "--n-pipe", "60000"],
                            ["--n-seq", "300", "--n-pipe", "3000"])], reps=5, timeout=300),
    Section("actors", [Module("processes", [], ["--quick"]), Module("broker", [], ["--quick"])],
            reps=3, timeout=600, ray="actors",
            ray_args=["--n-seq", "500", "--n-pipe", "3000", "--starts", "4", "--pgs", "20"],
            ray_quick=["--n-seq", "100", "--n-pipe", "1000", "--starts", "2", "--pgs", "5"],
            ray_timeout=400),
    Section("broker_sim", [Module("broker_sim", [], ["--quick"])], reps=5, timeout=900),
    Section("arrays", [Module("arrays", [], ["--mb", "8"])], reps=5, timeout=300),
    Section("tune", [Module("tune_overhead", ["--large"], ["--trials", "10", "--reports", "3"])],
            reps=3, timeout=900, ray="tune", ray_args=["--trials", "100", "--reports", "10"],
            ray_quick=["--trials", "10", "--reports", "3"], ray_reps=1, ray_timeout=900),
    Section("dashboard", [Module("dashboard", [], ["--trials", "10", "--reports", "3"])],
            reps=3, timeout=900),
    Section("deadlock", [Module("deadlock", [], ["--trials", "2"])], reps=3, timeout=600,
            ray="deadlock", ray_quick=["--deadlock-trials", "2"], ray_reps=1),
    Section("train", [Module("train_overhead", ["--rounds", "2"], ["--quick"])], reps=3,
            timeout=900),
    Section("scaling", [Module("scaling", [], ["--quick"], reps_flag=False)], reps=1,
            timeout=900),
    Section("cluster", [Module("cluster", [], ["--quick"])], reps=5, timeout=300),
]


class Run:
    """One suite run: its turns, what they produced, and what went wrong."""

    def __init__(self, args: argparse.Namespace, scratch: Path | None = None) -> None:
        self.args = args
        self.scratch = scratch or Path(tempfile.mkdtemp(prefix="actorrt-bench-"))
        self.turns: dict[str, list[dict[str, Any]]] = {}  # module -> its JSON, one per turn
        self.ray: dict[str, list[float]] = {}  # Ray figure -> samples
        self.ray_notes: dict[str, str] = {}
        self.ray_turns: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self.sections: dict[str, dict[str, Any]] = {}
        self.count = 0

    def log(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    # -- actorrt turns ---------------------------------------------------------------------

    def module_turn(self, section: Section, module: Module, reps: int) -> None:
        self.count += 1
        where = self.scratch / f"turn{self.count}"
        where.mkdir()
        cmd = [sys.executable, "-m", f"benchmarks.{module.name}",
               *(module.quick if self.args.quick else module.args)]
        if module.reps_flag:
            cmd += ["--reps", str(reps)]
        env = dict(os.environ, ACTORRT_BENCH_RESULTS=str(where))
        turn = run_bounded(cmd, timeout=section.timeout, env=env, cwd=ROOT)
        self._keep_log(module.name, turn)
        out = where / f"{module.name}.json"
        if turn.ok and out.exists():
            self.turns.setdefault(module.name, []).append(json.loads(out.read_text()))
            self.log(f"  {module.name}: {turn.seconds:.1f} s")
        else:
            why = f"timed out after {section.timeout:.0f} s" if turn.timed_out \
                else f"exit status {turn.rc}"
            self.failures.append(f"{module.name}: {why}")
            self.log(f"  {module.name}: FAILED ({why}) after {turn.seconds:.1f} s\n"
                     + _indent(turn.tail()))

    def _keep_log(self, name: str, turn: Turn) -> None:
        with open(self.scratch / f"{self.count:02d}-{name}.log", "w", encoding="utf-8") as f:
            f.write(" ".join(turn.cmd) + "\n\n" + turn.stdout + "\n--- stderr ---\n"
                    + turn.stderr)

    # -- Ray turns --------------------------------------------------------------------------

    def ray_turn(self, section: Section) -> None:
        assert section.ray is not None
        self.count += 1
        token = uuid.uuid4().hex
        temp = tempfile.mkdtemp(prefix="rb", dir="/tmp")  # Ray's socket paths must be short
        extra = section.ray_quick if self.args.quick else section.ray_args
        if section.ray == "deadlock":
            extra = [*extra, "--wait", str(self.args.ray_wait)]
        cmd = [str(self.args.ray_python), str(RAY_SCRIPT), section.ray, "--temp-dir", temp,
               *extra]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env[MARKER] = token
        bound = section.ray_timeout
        if section.ray == "deadlock":
            # ray_side's own bounds (trials' start-up 180 s, then the wait), plus Ray's start
            bound = self.args.ray_wait + 180 + 120
        turn = run_bounded(cmd, timeout=bound, env=env, cwd=temp)
        killed = sweep_marked(token)
        shutil.rmtree(temp, ignore_errors=True)
        self._keep_log(f"ray-{section.ray}", turn)
        payload = _ray_payload(turn.stdout)
        record: dict[str, Any] = {"workload": section.ray, "seconds": round(turn.seconds, 1),
                                  "rc": turn.rc, "timed_out": turn.timed_out,
                                  "killed_after_turn": killed}
        if payload is not None:
            record |= {k: payload[k] for k in ("ray", "import_s", "init_s") if k in payload}
        self.ray_turns.append(record)
        left = f", {len(killed)} lingering Ray processes killed" if killed else ""
        if section.ray == "deadlock":
            self._ray_deadlock(payload, bound)
        elif payload is None or not turn.ok:
            why = "timed out" if turn.timed_out else f"exit status {turn.rc}, no figures"
            self.failures.append(f"Ray {section.ray}: {why}")
            self.log(f"  Ray {section.ray}: FAILED ({why}) after {turn.seconds:.1f} s{left}\n"
                     + _indent(turn.tail()))
            return
        else:
            for key, value in payload.items():
                if isinstance(value, int | float) and not isinstance(value, bool) \
                        and key not in ("import_s", "init_s", "pid"):
                    self.ray.setdefault(key, []).append(float(value))
            if section.ray == "tune" and (payload.get("errors") or not payload["all_reported"]):
                self.failures.append("Ray tune: trials errored or did not report")
        self.log(f"  Ray {section.ray}: {turn.seconds:.1f} s (ray.init "
                 f"{(payload or {}).get('init_s', float('nan')):.1f} s){left}")

    def _ray_deadlock(self, payload: dict[str, Any] | None, bound: float) -> None:
        if payload is not None and payload.get("answered"):
            # Ray answered after all: record what it did, as it is.
            self.ray.setdefault("deadlock fit", []).append(payload["seconds"])
            self.ray_notes["deadlock error"] = (
                f"fit() returned, {payload.get('errors', '?')} errors "
                f"{payload.get('error_types', '')}")
            return
        if payload is None:
            self.ray_notes["deadlock fit"] = f"no answer; turn killed at its {bound:.0f} s bound"
            self.ray_notes["deadlock error"] = "no error: hangs"
            return
        waited = payload["seconds"]
        if payload.get("all_asked"):
            self.ray_notes["deadlock fit"] = (
                f"no answer {waited:.0f} s after every trial asked for its worker")
            self.ray_notes["deadlock error"] = f"no error in {waited:.0f} s: hangs"
        else:  # the trials never all reached the deadlock: say so, claim nothing more
            gate = payload.get("gate") or {}
            self.ray_notes["deadlock fit"] = (
                f"not measured: {gate.get('asked', '?')} of {payload['trials']} trials had "
                f"asked after {payload.get('startup_s', 0):.0f} s")

    # -- the run ------------------------------------------------------------------------------

    def section(self, section: Section) -> None:
        reps = self.args.reps or (2 if self.args.quick and section.reps > 1 else section.reps)
        start = time.perf_counter()
        self.log(f"{section.name}: {reps} repetition(s)"
                 + (" alternating with Ray" if self.args.ray and section.ray else ""))
        if not (self.args.ray and section.ray):
            for module in section.modules:
                self.module_turn(section, module, reps)
        else:
            ray_reps = section.ray_reps or self.args.ray_reps
            for rep in range(max(reps, ray_reps)):
                if rep < reps:
                    for module in section.modules:
                        self.module_turn(section, module, 1)
                if rep < ray_reps:
                    self.ray_turn(section)
        self.sections[section.name] = {"seconds": round(time.perf_counter() - start, 1),
                                       "reps": reps}


def _ray_payload(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith("RAY_BENCH_JSON "):
            payload: dict[str, Any] = json.loads(line.split(" ", 1)[1])
            return payload
    return None


def _indent(text: str) -> str:
    return "\n".join("      " + line for line in text.splitlines())


def collect(run: Run) -> tuple[list[_table.Row], dict[str, Any], dict[str, Any]]:
    """Rows in section order, the curves, and each module's details (its last turn's)."""
    rows: list[_table.Row] = []
    curves: dict[str, Any] = {}
    details: dict[str, Any] = {}
    for section in SECTIONS:
        for module in section.modules:
            turns = run.turns.get(module.name)
            if not turns:
                continue
            figures = _table.merge_figures(turns)
            rows += _table.build_rows(section.name, module.name, figures, run.ray,
                                      run.ray_notes)
            last = {k: v for k, v in turns[-1]["machine"].items() if k not in MACHINE_KEYS}
            curves |= last.pop("curves", {})
            details[module.name] = last
    return rows, curves, details


def header(info: dict[str, Any], run: Run, seconds: float, ray_version: str) -> list[str]:
    a = run.args
    mode = "quick (tiny sizes: not comparable with the targets)" if a.quick else "full"
    lines = [
        "# actorrt benchmark suite: latest run",
        "",
        f"- machine: {info['affinity']} CPUs usable of {info['cpus']} ({info['cpu_model']}), "
        f"{info['memory_gib']} GiB, {info['platform']}",
        f"- load average at start {info['load_average']}, at end "
        f"{[round(x, 2) for x in os.getloadavg()]} (others' work on the machine shows here)",
        f"- Python {info['python']}, event loop {info['event_loop']}, commit {info['commit']}, "
        f"{info['date']}",
        f"- mode: {mode}; repetitions per figure: "
        + ", ".join(f"{name} {s['reps']}" for name, s in run.sections.items())
        + f"; total {seconds / 60:.1f} min",
        "- value: median (min\u2013max) of the repetitions; ratio: speed against the baseline "
        "measured in the same turn (above 1: faster than the baseline)",
    ]
    if a.ray:
        lines.append(f"- Ray {ray_version}: measured in this run, alternating with actorrt's "
                     "turns; actorrt vs Ray: how many times faster actorrt is")
    return lines


def notes(details: dict[str, Any]) -> list[str]:
    """What a module says about how its figures were measured (``suite_note`` in its JSON),
    one header line each: the cluster section's network, say."""
    return [f"- {d['suite_note']}" for d in details.values() if d.get("suite_note")]


def write(run: Run, info: dict[str, Any], seconds: float, out: Path) -> bool:
    rows, curves, details = collect(run)
    ray_version = next((t["ray"] for t in run.ray_turns if "ray" in t), "2.60")
    missed = [r.spec.label for r in rows if r.failed_design_target]
    out.mkdir(parents=True, exist_ok=True)
    lines = header(info, run, seconds, ray_version) + notes(details)
    plots: list[str] = []
    if not run.args.no_plots and curves:
        from . import plots as plotting

        subtitle = plotting.subtitle_for({"machine": info})
        ray_tune = statistics.median(run.ray["tune seconds"]) if run.ray.get("tune seconds") \
            else None
        plots = [p.name for p in plotting.draw(curves, out, subtitle, ray_tune)]
    table = _table.markdown(rows, lines, bool(run.args.ray), ray_version)
    if run.failures:
        table += "\nFailed turns: " + "; ".join(run.failures) + "\n"
    if plots:
        table += "\n" + "\n".join(f"![{p}]({p})" for p in plots) + "\n"
    (out / "latest.md").write_text(table, encoding="utf-8")
    data = {
        "suite": {"quick": run.args.quick, "reps": run.args.reps, "ray": run.args.ray,
                  "only": run.args.only, "seconds": round(seconds, 1),
                  "sections": run.sections},
        "machine": info | {"load_average_end": [round(x, 2) for x in os.getloadavg()]},
        "ok": not missed and not run.failures,
        "design_targets_missed": missed,
        "failures": run.failures,
        "figures": [r.as_dict() for r in rows],
        "ray_turns": run.ray_turns,
        "curves": curves,
        "plots": plots,
        "details": details,
    }
    (out / "latest.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    print("\n" + table)
    print(f"written {out / 'latest.json'}, {out / 'latest.md'}"
          + (f", {', '.join(plots)}" if plots else ""))
    if missed:
        print("targets missed: " + "; ".join(missed), file=sys.stderr)
    return not missed


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, help="repetitions per figure (default: per section)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a project target is missed")
    parser.add_argument("--ray", action="store_true", help="also measure Ray, alternating")
    parser.add_argument("--ray-python", type=Path, default=RAY_PYTHON,
                        help=f"the Ray virtualenv's interpreter (default {RAY_PYTHON})")
    parser.add_argument("--ray-reps", type=int, default=3,
                        help="Ray turns for the actor workloads (Tune, deadlock: 1)")
    parser.add_argument("--ray-wait", type=float, default=60.0,
                        help="seconds to wait for Ray's answer in the deadlock case")
    parser.add_argument("--only", help="comma-separated sections: "
                        + ",".join(s.name for s in SECTIONS))
    parser.add_argument("--out", type=Path, help=f"output folder (default {RESULTS})")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    known = {s.name for s in SECTIONS}
    if args.only:
        unknown = set(args.only.split(",")) - known
        if unknown:
            parser.error(f"unknown sections {sorted(unknown)}; known: {sorted(known)}")
    if args.reps is not None and args.reps < 1:
        parser.error("--reps must be at least 1")
    # absolute, not resolved: the venv's python is a symlink, and Ray's turns run elsewhere
    args.ray_python = args.ray_python.absolute()
    if args.ray and not args.ray_python.exists():
        parser.error(f"{args.ray_python} does not exist: `make bench-ray` creates the Ray "
                     "virtualenv, or pass --ray-python")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    run = Run(args)
    info = machine()
    start = time.perf_counter()
    chosen = [s for s in SECTIONS if not args.only or s.name in args.only.split(",")]
    if args.ray:
        stale = sweep_marked(None, grace=0)  # Ray processes of an earlier, interrupted run
        if stale:
            run.log(f"killed {len(stale)} Ray processes left by an earlier run")
    try:
        for section in chosen:
            run.section(section)
    finally:
        if args.ray:
            sweep_marked(None, grace=5)
    seconds = time.perf_counter() - start
    met = write(run, info, seconds, args.out or RESULTS)
    if run.failures:
        print(f"failed: {'; '.join(run.failures)} (logs in {run.scratch})", file=sys.stderr)
        return 1
    shutil.rmtree(run.scratch, ignore_errors=True)
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
