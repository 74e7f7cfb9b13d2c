"""Scaling plots (PNG) from the curves of a suite run.

    python -m benchmarks.plots [RESULTS/latest.json] [--out DIR]

Draws, with matplotlib's Agg backend (no display needed):

- ``scaling_ask.png``: ask throughput vs concurrent callers, inline and worker-process
  actors, one line per number of actors; dotted: what perfectly linear scaling from one
  caller would give.
- ``scaling_broker.png``: broker decision time and deadlock-check time vs waiting requests,
  one line per node count; request+release time vs nodes; time to queue one request. A
  dotted line of slope 1 (cost proportional to the size) shows where a curve grows faster
  than linearly (steeper than it) or stays flat.
- ``scaling_tune.png``: ``Tuner.fit`` seconds vs trials beside the process-pool floor (and
  Ray's 100-trial sweep when the run measured it), with a linear line through the largest
  sweep; and the overhead per trial (flat where the cost is linear in trials).

Every axis that spans decades is logarithmic.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from ._common import RESULTS

REFERENCE = {"color": "0.55", "linestyle": ":", "linewidth": 1.5}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _points(x: list[float], ys: list[float | None]) -> tuple[list[float], list[float]]:
    pairs = [(a, b) for a, b in zip(x, ys, strict=True) if b is not None and b > 0]
    return [a for a, _ in pairs], [b for _, b in pairs]


def _linear_reference(ax: Any, curve: dict[str, Any], label: str = "∝ size (linear)") -> None:
    """A slope-1 line through the lowest first point of the curve's series."""
    starts = [_points(curve["x"], ys) for ys in curve["series"].values()]
    starts = [(xs[0], ys[0]) for xs, ys in starts if xs]
    if not starts:
        return
    x0, y0 = min(starts, key=lambda p: (p[0], p[1]))
    x1 = max(curve["x"])
    ax.plot([x0, x1], [y0, y0 * x1 / x0], label=label, **REFERENCE)


def _series(ax: Any, curve: dict[str, Any], marker: str = "o") -> None:
    for label, ys in curve["series"].items():
        xs, vals = _points(curve["x"], ys)
        if xs:
            ax.plot(xs, vals, marker=marker, label=label)


def _short(v: float) -> str:
    """A tick label without exponents: 300, 2,000, 50k, 1.5M, 0.2."""
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e4:
        return f"{v / 1e3:g}k"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:g}"


def _plain_log(axis: Any, lo: float, hi: float) -> None:
    """Plain numbers on a log axis; the 2s and 5s labelled too when it spans little."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: _short(v)))
    if lo > 0 and hi / lo < 50:

        def minor(v: float, _: object) -> str:
            mantissa = round(v / 10 ** math.floor(math.log10(v)), 6)
            return _short(v) if mantissa in (2, 5) else ""

        axis.set_minor_formatter(FuncFormatter(minor))
    else:
        axis.set_minor_formatter(NullFormatter())


def _finish(ax: Any, title: str, xlabel: str, ylabel: str, *, logx: bool = True,
            logy: bool = True, xticks: list[float] | None = None) -> None:
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.autoscale_view()
    if logx:
        _plain_log(ax.xaxis, *ax.get_xlim())
    if logy:
        _plain_log(ax.yaxis, *ax.get_ylim())
    if xticks:
        from matplotlib.ticker import NullFormatter

        ax.set_xticks(xticks, [_short(x) for x in xticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)


def plot_ask(curves: dict[str, Any], out: Path, subtitle: str) -> Path | None:
    kinds = [k for k in ("ask_inline", "ask_process") if k in curves]
    if not kinds:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.2 * len(kinds), 4.8), squeeze=False)
    titles = {"ask_inline": "Inline actors (on the driver's loop)",
              "ask_process": "Worker-process actors (sync method)"}
    for ax, kind in zip(axes[0], kinds, strict=True):
        curve = curves[kind]
        _series(ax, curve)
        first = next(iter(curve["series"].values()))
        if first and first[0]:
            x = curve["x"]
            ax.plot(x, [first[0] * c / x[0] for c in x],
                    label="linear scaling from 1 caller", **REFERENCE)
        _finish(ax, titles[kind], "concurrent callers (each awaits its asks in turn)",
                "asks per second", xticks=curve["x"])
    fig.suptitle(f"Ask throughput vs concurrent callers and actors\n{subtitle}", fontsize=12)
    return _save(fig, out / "scaling_ask.png")


def plot_broker(curves: dict[str, Any], out: Path, subtitle: str) -> Path | None:
    panels = [
        ("decision_vs_pending", "One decision (release, grant, enqueue)", "µs per decision"),
        ("deadlock_check_vs_pending", "One deadlock check (every waiter blocked)",
         "ms per check"),
        ("request_release_vs_nodes", "Request + release on an idle or busy cluster",
         "µs per request+release"),
        ("enqueue_vs_pending", "Queueing one request while the cluster is full",
         "µs per request queued"),
    ]
    panels = [p for p in panels if p[0] in curves]
    if not panels:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(12.5, 9.5), squeeze=False)
    flat = list(axes.flat)
    for ax, (key, title, ylabel) in zip(flat, panels, strict=False):
        curve = curves[key]
        _series(ax, curve)
        _linear_reference(ax, curve)
        _finish(ax, title, curve["x_label"] + " (simulated, full 4-CPU nodes)"
                if key != "request_release_vs_nodes" else "nodes (simulated, 8 CPUs each)",
                ylabel, xticks=curve["x"])
    for ax in flat[len(panels):]:
        ax.axis("off")
    skipped = curves.get("skipped") or []
    if skipped:
        note = "; ".join(f"{s['pending']:,} waiting on {s['nodes']:,} nodes (~"
                         f"{s['estimated_build_s']:.0f} s to build)" for s in skipped)
        fig.text(0.5, 0.005, f"Not measured in this run: {note}", ha="center", fontsize=8)
    fig.suptitle(f"Broker cost vs waiting requests and nodes (pure broker time)\n{subtitle}",
                 fontsize=12)
    return _save(fig, out / "scaling_broker.png")


def plot_tune(curves: dict[str, Any], out: Path, subtitle: str,
              ray_tune_s: float | None) -> Path | None:
    curve = curves.get("tune_vs_trials")
    if curve is None:
        return None
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.8))
    _series(left, curve)
    mine = curve["series"]["actorrt Tuner.fit"]
    x = curve["x"]
    # Through the largest sweep, where fixed start-up costs weigh least: a curve steeper
    # than this line at its right end grows faster than linearly.
    left.plot([x[0], x[-1]], [mine[-1] * x[0] / x[-1], mine[-1]],
              label="linear, through the largest sweep", **REFERENCE)
    if ray_tune_s is not None:
        left.plot([100], [ray_tune_s], marker="*", markersize=14, linestyle="none",
                  color="tab:red", label="Ray 2.60, 100 trials (same run)")
    _finish(left, f"Tuner.fit, {curve['reports']} reports per trial, {{cpu: 0.5}} on 4 CPUs",
            "trials", "seconds (cold worker processes)", xticks=x)
    pool = curve["series"]["process pool floor"]
    overhead = [(a - b) / t * 1000 for a, b, t in zip(mine, pool, x, strict=True)]
    right.plot(x, overhead, marker="o", label="(actorrt - floor) / trials")
    right.set_ylim(bottom=0)
    _finish(right, "Overhead per trial (flat = cost linear in trials)", "trials",
            "ms per trial", logy=False, xticks=x)
    fig.suptitle(f"Tune overhead vs number of trials\n{subtitle}", fontsize=12)
    return _save(fig, out / "scaling_tune.png")


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def draw(curves: dict[str, Any], out: Path, subtitle: str,
         ray_tune_s: float | None = None) -> list[Path]:
    """Draw every plot the curves allow; returns the files written."""
    made = [plot_ask(curves, out, subtitle), plot_broker(curves, out, subtitle),
            plot_tune(curves, out, subtitle, ray_tune_s)]
    return [p for p in made if p is not None]


def subtitle_for(data: dict[str, Any]) -> str:
    m = data.get("machine", {})
    return (f"{m.get('affinity', '?')} CPUs ({m.get('cpu_model', '?')}), Python "
            f"{m.get('python', '?')}, {m.get('event_loop', '?')}, commit {m.get('commit', '?')}, "
            f"{m.get('date', '')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("latest", nargs="?", default=str(RESULTS / "latest.json"))
    parser.add_argument("--out", help="folder for the PNGs (default: beside the JSON)")
    args = parser.parse_args()
    data = json.loads(Path(args.latest).read_text())
    ray_tune = next((r["ray"]["median"] for r in data["figures"]
                     if r["name"] == "100 trials x 10 reports" and r.get("ray")
                     and r["ray"].get("median")), None)
    out = Path(args.out) if args.out else Path(args.latest).parent
    for path in draw(data.get("curves", {}), out, subtitle_for(data), ray_tune):
        print(f"written {path}")


if __name__ == "__main__":
    main()
