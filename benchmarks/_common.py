"""Shared plumbing for benchmarks: repetitions, tables, JSON stamped with the commit."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Where JSON results go; tests point it elsewhere so a smoke run overwrites nothing.
RESULTS = Path(os.environ.get("ACTORRT_BENCH_RESULTS", Path(__file__).resolve().parent / "results"))


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True, cwd=Path(__file__).parent,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, cwd=Path(__file__).parent,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "uncommitted"


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit(),
    }


@dataclass
class Figure:
    """One measured figure beside its same-run baseline; higher is better for rates."""

    name: str
    unit: str
    values: list[float]
    baseline_values: list[float] = field(default_factory=list)
    target_ratio: float | None = None  # the figure must be >= target_ratio x baseline
    target_value: float | None = None  # or >= this absolute value

    @property
    def value(self) -> float:
        return statistics.median(self.values)

    @property
    def baseline(self) -> float | None:
        return statistics.median(self.baseline_values) if self.baseline_values else None

    @property
    def ratio(self) -> float | None:
        base = self.baseline
        return None if not base else self.value / base

    @property
    def met(self) -> bool | None:
        if self.target_ratio is not None:
            ratio = self.ratio
            return ratio is not None and ratio >= self.target_ratio
        if self.target_value is not None:
            return self.value >= self.target_value
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "unit": self.unit, "median": self.value,
            "samples": self.values, "baseline_median": self.baseline,
            "baseline_samples": self.baseline_values, "ratio": self.ratio,
            "target_ratio": self.target_ratio, "target_value": self.target_value,
            "met": self.met,
        }


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return ""
    return f"±{(max(values) - min(values)) / 2 / statistics.median(values) * 100:.0f}%"


def report(title: str, figures: list[Figure], out_name: str, extra: dict[str, Any]) -> bool:
    """Print the table, write JSON; return whether every target was met."""
    info = machine() | extra
    print(f"\n{title}  (commit {info['commit']}, {info['affinity']} CPUs, "
          f"Python {info['python']}, loop {extra.get('loop', '?')})")
    header = f"{'figure':<42} {'value':>14} {'baseline':>14} {'ratio':>7} {'target':>9}  ok"
    print(header)
    print("-" * len(header))
    for f in figures:
        base = f"{f.baseline:,.0f}" if f.baseline is not None else "-"
        ratio = f"{f.ratio:.2f}" if f.ratio is not None else "-"
        if f.target_ratio is not None:
            target = f">={f.target_ratio:.2f}x"
        elif f.target_value is not None:
            target = f">={f.target_value:,.0f}"
        else:
            target = "-"
        ok = {True: "yes", False: "NO", None: ""}[f.met]
        value = f"{f.value:,.0f} {spread(f.values)}"
        print(f"{f.name + ' (' + f.unit + ')':<42} {value:>14} {base:>14} {ratio:>7} "
              f"{target:>9}  {ok}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{out_name}.json"
    path.write_text(json.dumps(
        {"benchmark": out_name, "machine": info, "figures": [f.as_dict() for f in figures]},
        indent=2,
    ))
    print(f"written {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return all(f.met is not False for f in figures)


def alternate(reps: int, *runs: Callable[[], float]) -> list[list[float]]:
    """Run each measurement ``reps`` times, interleaved, so drift hits all alike."""
    samples: list[list[float]] = [[] for _ in runs]
    for _ in range(reps):
        for i, run in enumerate(runs):
            samples[i].append(run())
    return samples


def exit_for(ok: bool, check: bool) -> None:
    if check and not ok:
        print("target missed", file=sys.stderr)
        raise SystemExit(1)
