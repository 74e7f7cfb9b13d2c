"""The suite's rows: figures merged across turns, their targets, Ray's column, and the
Markdown and JSON they are written as."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ._common import Figure, number

DESIGN = "§8"  # the project's targets: they fail `--check`
CLUSTER = "cluster"  # cluster mode's targets (docs/benchmarks.md): they fail `--check` too
CHECKED = (DESIGN, CLUSTER)


@dataclass(frozen=True)
class Spec:
    """How a module's figure shows in the suite's table."""

    label: str
    source: str | None = None  # "§8", "§4" or "module" when the figure has a target
    ray: str | None = None  # the Ray figure beside it (a key of ray_side.py's JSON)


# Figures not listed here show under their module's name; a module's own target then counts
# as "module" (shown, never failing `--check`). A spec with an empty label hides the figure.
SPECS: dict[tuple[str, str], Spec] = {
    ("core", "inline tell"): Spec("inline tell (msgs/s)", DESIGN),
    ("core", "inline ask"): Spec("inline ask (round trips/s)", DESIGN),
    ("wire", "Connection request, sequential"): Spec(
        "wire: connection request, sequential (req/s)", "module"),
    ("wire", "Connection request, pipelined 1000"): Spec(
        "wire: connection requests, 1,000 in flight (req/s)", "module"),
    ("wire", "raw echo, sequential"): Spec(""),
    ("wire", "raw echo, pipelined 1000"): Spec(""),
    ("processes", "process ask, sequential"): Spec(
        "cross-process ask, sequential, sync method (calls/s)", DESIGN, "sequential calls/s"),
    ("processes", "process ask, sequential, async method"): Spec(
        "cross-process ask, sequential, async method (calls/s)"),
    ("processes", "process calls, pipelined 1000"): Spec(
        "cross-process calls, pipelined, 1,000 in flight (calls/s)", DESIGN,
        "pipelined calls/s"),
    # No Ray figure beside it: Ray starts a fresh process for each actor, so the like for
    # like comparison is the start on a new worker process (the next row).
    ("processes", "start+stop, warm worker"): Spec(
        "actor start+stop on a warm worker process (per s)", DESIGN),
    ("processes", "cold worker start"): Spec(
        "actor start on a new worker process (ms)", "module", "actor start ms"),
    ("processes", "raw echo, sequential"): Spec(""),
    ("processes", "raw echo, pipelined window 1000"): Spec(""),
    ("broker", "placement group reserve+release"): Spec(
        "placement group reserve+release, 2 x {CPU: 1}, from the driver (per s)", DESIGN,
        "placement group reserve+release/s"),
    ("tune_overhead", "100 trials x 10 reports"): Spec(
        "Tune 100 trials x 10 reports, {cpu: 0.5} on 4 CPUs (s)", DESIGN, "tune seconds"),
    ("tune_overhead", "100 trials x 10 reports, warm (floor: a warm pool)"): Spec(
        "Tune 100 x 10 again, warm worker pool (s; floor: a warm process pool)", "module"),
    ("tune_overhead", "100 trials x 10 reports, driver CPU per trial"): Spec(
        "Tune 100 x 10, the driver's CPU per trial (ms; floor: the pool's parent)", "module"),
    ("tune_overhead", "1000 trials x 10 reports"): Spec(
        "Tune 1,000 trials x 10 reports (s)", "module"),
    ("tune_overhead", "1000 trials x 10 reports, driver CPU per trial"): Spec(
        "Tune 1,000 x 10, the driver's CPU per trial (ms; floor: the pool's parent)",
        "module"),
    ("tune_overhead", "10000 trials x 10 reports"): Spec(
        "Tune 10,000 trials x 10 reports (s)", "module"),
    ("tune_overhead", "10000 trials x 10 reports, driver CPU per trial"): Spec(
        "Tune 10,000 x 10, the driver's CPU per trial (ms; floor: the pool's parent)",
        "module"),
    ("dashboard", "sweeps with the dashboard polled 1/s"): Spec(
        "Tune 3 x (100 trials x 10 reports) with the dashboard open, polled 1/s (s; "
        "baseline: no dashboard)"),
    ("dashboard", "time without / time with the dashboard, per pair of turns"): Spec(
        "Tune with the dashboard open: time without / time with, per pair of turns (x)",
        "module"),
    ("deadlock", "Modin-style deadlock: time to ResourceDeadlockError"): Spec(
        "Modin-style deadlock: last worker request to ResourceDeadlockError (s)", "§4",
        "deadlock error"),
    ("deadlock", "Modin-style deadlock: whole sweep, fit() returns"): Spec(
        "Modin-style deadlock: whole sweep, fit() returns (s)", None, "deadlock fit"),
    ("train_overhead", "DDP steps vs floor"): Spec(
        "Train DDP steps, 2 workers, gloo (steps/s)", DESIGN),
    ("train_overhead", "DDP steps per CPU-second, rank 0 thread"): Spec(
        "Train DDP steps per CPU-second of rank 0's training thread"),
    ("train_overhead", "start-up, cold (floor: spawn)"): Spec(
        "Train start-up, fresh runtime, to the loop's first line (ms)"),
    ("train_overhead", "start-up, warm pool (floor: spawn)"): Spec(
        "Train start-up, warm worker pool (ms; floor: a fresh spawn)"),
    ("broker", "decisions, 10,000 waiting on 1,000 nodes"): Spec(
        "broker decisions, 10,000 waiting on 1,000 simulated nodes (per s)", "module"),
    ("broker", "deadlock check, 10,000 waiting on 1,000 nodes"): Spec(
        "broker deadlock check, 10,000 waiting on 1,000 simulated nodes (ms)"),
    ("broker_sim", "pure broker reserve+release, 2 x {CPU: 1}"): Spec(
        "pure broker reserve+release, 2 x {CPU: 1}, no runtime (per s)", "module"),
    ("broker_sim", "pure broker reserve+release, dict bundles"): Spec(
        "pure broker reserve+release, bundles given as dicts (per s)"),
    ("cluster", "cross-node ask, sequential"): Spec(
        "cross-node ask, sequential, sync method (calls/s; baseline: raw TCP echo)", CLUSTER),
    ("cluster", "cross-node ask, sequential, vs TLS echo"): Spec(
        "cross-node ask, sequential, sync method (calls/s; baseline: raw TLS echo)"),
    ("cluster", "cross-node ask, sequential, vs cross-process"): Spec(
        "cross-node ask, sequential, sync method (calls/s; baseline: the same ask "
        "cross-process)"),
    ("cluster", "cross-node ask, sequential, async method"): Spec(
        "cross-node ask, sequential, async method (calls/s; baseline: raw TCP echo)"),
    ("cluster", "cross-node calls, pipelined 1000"): Spec(
        "cross-node calls, pipelined, 1,000 in flight (calls/s; baseline: raw TCP echo)",
        CLUSTER),
    ("cluster", "cross-node calls, pipelined 1000, vs TLS echo"): Spec(
        "cross-node calls, pipelined, 1,000 in flight (calls/s; baseline: raw TLS echo)"),
    ("cluster", "cross-node calls, pipelined 1000, vs cross-process"): Spec(
        "cross-node calls, pipelined, 1,000 in flight (calls/s; baseline: the same calls "
        "cross-process)"),
    ("cluster", "placement group STRICT_SPREAD 3 x {CPU: 1}, 3 nodes"): Spec(
        "placement group reserve+release, STRICT_SPREAD 3 x {CPU: 1} on 3 nodes (per s; "
        "baseline: one machine)"),
    ("cluster", "Tune 100 trials x 10 reports, {CPU: 1}, 3 nodes"): Spec(
        "Tune 100 trials x 10 reports, {CPU: 1} on 3 nodes of 2 CPUs (s; baseline: one "
        "machine, 6 CPUs)"),
    ("cluster", "node loss, SIGKILL: pending ask to ActorDiedError"): Spec(
        "node loss, processes SIGKILLed: pending ask to ActorDiedError (s)", CLUSTER),
    ("cluster", "node loss, link cut: pending ask to ActorDiedError"): Spec(
        "node loss, link cut (silence): pending ask to ActorDiedError (s)", CLUSTER),
    ("cluster", "raw TCP echo, sequential"): Spec(""),
    ("cluster", "raw TCP echo, pipelined window 1000"): Spec(""),
    ("cluster", "raw TLS echo, sequential"): Spec(""),
    ("cluster", "raw TLS echo, pipelined window 1000"): Spec(""),
}


@dataclass
class Row:
    section: str
    module: str
    figure: Figure
    spec: Spec
    ray_values: list[float] = field(default_factory=list)
    ray_note: str | None = None

    @property
    def source(self) -> str | None:
        if self.figure.target_ratio is None and self.figure.target_value is None:
            return None
        return self.spec.source or "module"

    @property
    def vs_ray(self) -> float | None:
        """How many times faster actorrt is than Ray (rates: a/r; times: r/a)."""
        if not self.ray_values:
            return None
        ray = statistics.median(self.ray_values)
        mine = self.figure.value
        if not ray or not mine:
            return None
        return ray / mine if self.figure.lower_is_better else mine / ray

    @property
    def failed_design_target(self) -> bool:
        """A target that fails `--check` was missed."""
        return self.source in CHECKED and self.figure.met is False

    def as_dict(self) -> dict[str, Any]:
        ray: dict[str, Any] | None = None
        if self.ray_values or self.ray_note:
            ray = {"samples": self.ray_values, "note": self.ray_note}
            if self.ray_values:
                ray |= {"median": statistics.median(self.ray_values),
                        "min": min(self.ray_values), "max": max(self.ray_values)}
        return {"section": self.section, "module": self.module, "label": self.spec.label,
                **self.figure.as_dict(), "target_source": self.source, "ray": ray,
                "actorrt_vs_ray_speed": self.vs_ray}


def merge_figures(turns: list[dict[str, Any]]) -> list[Figure]:
    """One module's figures, their samples pooled over its turns (in first-seen order)."""
    merged: dict[str, Figure] = {}
    for data in turns:
        for f in data["figures"]:
            if f["name"] not in merged:
                merged[f["name"]] = Figure(
                    f["name"], f["unit"], [], [], f.get("target_ratio"), f.get("target_value"),
                    bool(f.get("lower_is_better")))
            merged[f["name"]].values.extend(f["samples"])
            merged[f["name"]].baseline_values.extend(f.get("baseline_samples") or [])
    return list(merged.values())


def build_rows(section: str, module: str, figures: list[Figure],
               ray: dict[str, list[float]], ray_notes: dict[str, str]) -> list[Row]:
    rows = []
    for f in figures:
        spec = SPECS.get((module, f.name), Spec(f"{module}: {f.name} ({f.unit})"))
        if not spec.label:
            continue
        row = Row(section, module, f, spec)
        if spec.ray is not None:
            row.ray_values = list(ray.get(spec.ray, []))
            row.ray_note = ray_notes.get(spec.ray)
        rows.append(row)
    return rows


def _value(values: list[float]) -> str:
    med = number(statistics.median(values))
    if len(values) < 2:
        return med
    return f"{med} ({number(min(values))}\u2013{number(max(values))})"


def _target(row: Row) -> str:
    f = row.figure
    if f.target_ratio is not None:
        text = f"≥ {f.target_ratio:.2f}\u00d7 baseline"
    elif f.target_value is not None:
        text = ("≤ " if f.lower_is_better else "≥ ") + number(f.target_value)
    else:
        return ""
    return f"{text} ({row.source})"


def _met(row: Row) -> str:
    met = row.figure.met
    if met is None:
        return ""
    if row.source in CHECKED:
        return "yes" if met else "**MISSED**"
    return "yes" if met else "missed"


def _ray(row: Row) -> tuple[str, str]:
    if row.ray_values:
        vs = row.vs_ray
        return _value(row.ray_values), (number(vs) + "\u00d7" if vs is not None else "")
    if row.ray_note:
        return row.ray_note, ""
    return "", ""


def markdown(rows: list[Row], header: list[str], with_ray: bool, ray_version: str) -> str:
    cols = ["figure", "actorrt: median (min\u2013max)", "baseline, same run", "ratio"]
    if with_ray:
        cols += [f"Ray {ray_version}, same run", "actorrt vs Ray"]
    cols += ["target", "met"]
    lines = [*header, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        f = row.figure
        cells = [row.spec.label, _value(f.values),
                 _value(f.baseline_values) if f.baseline_values else "",
                 number(f.ratio) if f.ratio is not None else ""]
        if with_ray:
            cells += list(_ray(row))
        cells += [_target(row), _met(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
