"""Shared plumbing for benchmarks: figures with their samples, tables, JSON stamped with the
commit and the machine."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Where JSON results go; tests and the suite point it elsewhere so a run overwrites nothing.
RESULTS = Path(os.environ.get("ACTORRT_BENCH_RESULTS", Path(__file__).resolve().parent / "results"))
ROOT = Path(__file__).resolve().parent.parent


def commit() -> str:
    """The checkout's short commit, ``-dirty`` when tracked files changed."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True, cwd=ROOT, timeout=10,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, cwd=ROOT, timeout=10,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "uncommitted"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def filesystem_of(path: str) -> str:
    """The type of the file system that holds ``path`` (``/proc/mounts``), e.g. ``ext4``."""
    best, kind = "", "?"
    real = os.path.realpath(path)
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1]
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return f"{kind} ({best or '?'})"


def machine() -> dict[str, Any]:
    """What a reader needs to judge a figure: the machine, its load, the software, the commit."""
    try:
        import uvloop

        loop = f"uvloop {uvloop.__version__}"
    except ImportError:  # pragma: no cover - uvloop is a dependency of actorrt
        loop = "asyncio"
    return {
        "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model(),
        "memory_gib": memory_gib(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "event_loop": loop,
        "commit": commit(),
        # Tune's figures follow the file system of its storage (ext4, tmpfs, ...).
        "tmp_filesystem": filesystem_of(tempfile.gettempdir()),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


@dataclass
class Figure:
    """One measured figure beside its same-run baseline.

    ``ratio`` is always a speed ratio against the baseline (above 1: faster than the
    baseline): ``value / baseline`` for rates, ``baseline / value`` when lower is better
    (seconds, milliseconds). A target is either a ratio (``ratio >= target_ratio``) or a
    value (``value >= target_value``, or ``<=`` when lower is better).
    """

    name: str
    unit: str
    values: list[float]
    baseline_values: list[float] = field(default_factory=list)
    target_ratio: float | None = None
    target_value: float | None = None
    lower_is_better: bool = False

    @property
    def value(self) -> float:
        return statistics.median(self.values)

    @property
    def baseline(self) -> float | None:
        return statistics.median(self.baseline_values) if self.baseline_values else None

    @property
    def ratio(self) -> float | None:
        base = self.baseline
        if not base or not self.value:
            return None
        return base / self.value if self.lower_is_better else self.value / base

    @property
    def met(self) -> bool | None:
        if self.target_ratio is not None:
            ratio = self.ratio
            return ratio is not None and ratio >= self.target_ratio
        if self.target_value is not None:
            if self.lower_is_better:
                return self.value <= self.target_value
            return self.value >= self.target_value
        return None

    def target_text(self) -> str:
        if self.target_ratio is not None:
            return f">={self.target_ratio:.2f}x"
        if self.target_value is not None:
            return ("<=" if self.lower_is_better else ">=") + number(self.target_value)
        return "-"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "unit": self.unit, "median": self.value,
            "min": min(self.values), "max": max(self.values),
            "samples": self.values, "baseline_median": self.baseline,
            "baseline_samples": self.baseline_values, "ratio": self.ratio,
            "target_ratio": self.target_ratio, "target_value": self.target_value,
            "lower_is_better": self.lower_is_better, "met": self.met,
        }


def number(x: float) -> str:
    """A figure for a table: thousands separators for large values, 3 digits for small ones."""
    if x != x:  # NaN
        return "nan"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def spread(values: list[float]) -> str:
    """Half the min-max range as a percentage of the median ("" for one sample)."""
    if len(values) < 2:
        return ""
    return f"±{(max(values) - min(values)) / 2 / statistics.median(values) * 100:.0f}%"


def report(title: str, figures: list[Figure], out_name: str, extra: dict[str, Any]) -> bool:
    """Print the table, write ``RESULTS/out_name.json``; return whether every target was met."""
    info = machine() | extra
    print(f"\n{title}  (commit {info['commit']}, {info['affinity']} CPUs, "
          f"Python {info['python']}, loop {extra.get('loop', '?')}, "
          f"temp files on {info['tmp_filesystem']})")
    header = f"{'figure':<50} {'value':>16} {'baseline':>12} {'ratio':>7} {'target':>10}  ok"
    print(header)
    print("-" * len(header))
    for f in figures:
        base = number(f.baseline) if f.baseline is not None else "-"
        ratio = f"{f.ratio:.2f}" if f.ratio is not None else "-"
        ok = {True: "yes", False: "NO", None: ""}[f.met]
        value = f"{number(f.value)} {spread(f.values)}"
        print(f"{f.name + ' (' + f.unit + ')':<50} {value:>16} {base:>12} {ratio:>7} "
              f"{f.target_text():>10}  {ok}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{out_name}.json"
    path.write_text(json.dumps(
        {"benchmark": out_name, "machine": info, "figures": [f.as_dict() for f in figures]},
        indent=2,
    ))
    print(f"written {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return all(f.met is not False for f in figures)


def sized_parser(doc: str, sizes: dict[str, dict[str, int]],
                 options: dict[str, str]) -> argparse.ArgumentParser:
    """A module's options: ``--check``, ``--quick``, ``--reps`` and one integer option per
    size in ``options`` (``n_seq`` -> ``--n-seq``); :func:`chosen_sizes` reads them."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny sizes, {sizes['quick']['reps']} repetition(s)")
    parser.add_argument("--reps", type=int, help=f"repetitions (default "
                        f"{sizes['default']['reps']}; --quick {sizes['quick']['reps']})")
    for key, text in options.items():
        parser.add_argument("--" + key.replace("_", "-"), type=int, help=text)
    return parser


def chosen_sizes(args: argparse.Namespace, sizes: dict[str, dict[str, int]]) -> dict[str, int]:
    """The sizes of ``--quick`` or the default ones, each overridden by its own option."""
    chosen = dict(sizes["quick" if args.quick else "default"])
    for key in chosen:
        if getattr(args, key) is not None:
            chosen[key] = getattr(args, key)
    return chosen


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
