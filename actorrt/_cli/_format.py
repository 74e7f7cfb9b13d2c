"""Text output of the ``actorrt`` command: tables, amounts, the status and results reports.

Pure functions from data to text: the commands in ``actorrt._cli._main`` gather the data
(``actorrt._control._status`` snapshots, ``actorrt._cli._experiment`` summaries) and print
what these return, so the layout is tested without a terminal.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from ._experiment import Experiment, TrialSummary, flatten

__all__ = ["amount", "amounts", "render_results", "render_status", "results_json", "table"]

_ORDER = {"CPU": 0, "GPU": 1, "memory": 2}
_STATE_ORDER = (
    "unresponsive", "running", "starting", "pending", "restarting", "stopping", "dead"
)


def amount(name: str, value: float) -> str:
    """One resource amount as people read it (memory in binary units)."""
    if name == "memory":
        size = float(value)
        for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(size) < 1024 or unit == "TiB":
                return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
            size /= 1024
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}".rstrip("0")


def amounts(resources: Mapping[str, float]) -> str:
    """``{CPU: 1, GPU: 0.5}``; ``{}`` for nothing."""
    keys = sorted(resources, key=lambda k: (_ORDER.get(k, 3), k))
    return "{" + ", ".join(f"{k}: {amount(k, resources[k])}" for k in keys) + "}"


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    indent: str = "  ",
    right: Sequence[int] = (),
) -> list[str]:
    """Aligned columns, those in ``right`` right-aligned; a left-aligned last column is left
    ragged (it holds long text)."""
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    last = len(header) - 1

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in right else cell if i == last else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return (indent + "  ".join(parts)).rstrip()

    return [line(header), *(line(row) for row in rows)]


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


# ------------------------------------------------------------------------------------ status


def render_status(data: Mapping[str, Any], command: str, width: int = 100) -> str:
    """The text of ``actorrt status`` for one runtime's snapshot."""
    up = data["now"] - data["started_at"] if data.get("started_at") else None
    lines = [
        f"actorrt runtime {data['runtime_id']}, pid {data['pid']}"
        + (f", up {_duration(up)}" if up is not None else ""),
        f"  command: {command}",
        "",
    ]
    lines += _resources(data["resources"])
    lines += _groups(data["placement_groups"], width)
    lines += _pending(data["pending"], width)
    lines += _actors(data["actors"], data["actor_counts"], width)
    return "\n".join(lines).rstrip() + "\n"


def _resources(res: Mapping[str, Any]) -> list[str]:
    total, used, free = res["total"], res["used"], res["available"]
    names = sorted(total, key=lambda k: (_ORDER.get(k, 3), k))
    rows = [
        [name, amount(name, total[name]), amount(name, used.get(name, 0.0)),
         amount(name, free.get(name, 0.0))]
        for name in names
    ]  # fmt: skip
    out = ["Resources", *table(["resource", "total", "used", "available"], rows, right=(1, 2, 3))]
    gpus = res.get("gpus") or []
    if gpus:
        several_nodes = len({g["node"] for g in gpus}) > 1
        rows = [
            [
                (f"{g['node']}/" if several_nodes else "") + str(g["id"]),
                amount("GPU", g["capacity"]),
                amount("GPU", g["capacity"] - g["free"]),
                amount("GPU", g["free"]),
            ]
            for g in gpus
        ]
        out += [
            "",
            "GPU devices",
            *table(["device", "total", "used", "free"], rows, right=(1, 2, 3)),
        ]
    out.append("")
    return out


def _groups(groups: Sequence[Mapping[str, Any]], width: int) -> list[str]:
    reserved = sum(g["state"] == "reserved" for g in groups)
    out = [
        f"Placement groups: {len(groups)} ({reserved} reserved, {len(groups) - reserved} pending)"
    ]
    rows = []
    for g in groups:
        bundles = ", ".join(
            amounts(b) + (f" free {amounts(g['free'][i])}" if g.get("free") else "")
            for i, b in enumerate(g["bundles"])
        )
        rows.append(
            [
                g["id"],
                g["state"],
                str(g.get("strategy") or "-"),
                _clip(g["holder_name"], 40),
                _clip(bundles, width),
            ]
        )
    if rows:
        out += table(["id", "state", "strategy", "holder", "bundles"], rows)
    for g in groups:
        if g.get("members"):
            out.append(f"    {g['id']} runs: " + _clip(", ".join(g["members"]), width))
    out.append("")
    return out


def _pending(pending: Sequence[Mapping[str, Any]], width: int) -> list[str]:
    out = [f"Pending requests: {len(pending)}"]
    for p in pending:
        asks = ", ".join(amounts(b) for b in p["bundles"])
        where = "" if p["queue"] == "cluster" else f" in group {p['queue']}"
        kind = f"a {p['strategy']} placement group of " if p["kind"] == "placement group" else ""
        out.append(
            f"  {p['request_id']}: {p['holder_name']} asks for {kind}{asks}{where}, "
            f"waiting {_duration(p['waited_s'])}"
        )
        wrapped = textwrap.wrap("why: " + p["reason"], width=max(width - 6, 40))
        out += ["      " + line for line in wrapped]
    out.append("")
    return out


def _actors(
    actors: Sequence[Mapping[str, Any]], counts: Mapping[str, int], width: int
) -> list[str]:
    known = [s for s in _STATE_ORDER if counts.get(s)]
    others = sorted(s for s in counts if s not in _STATE_ORDER)
    by_state = ", ".join(f"{counts[s]} {s}" for s in [*known, *others])
    out = [f"Actors: {len(actors)}" + (f" ({by_state})" if by_state else "")]
    rows = []
    order = {s: i for i, s in enumerate(_STATE_ORDER)}
    for a in sorted(actors, key=lambda a: (order.get(a["state"], 99), a["id"])):
        if a["where"] == "inline":
            where = "inline"
        elif a["where"] == "process":
            where = f"process {a['pid']}" if a["pid"] else "process"
        else:
            where = "-"
        notes = []
        if a.get("unresponsive"):
            notes.append(f"process {a['unresponsive']}")
        if a.get("resources"):
            notes.append(amounts(a["resources"]))
        if a.get("group"):
            notes.append(f"group {a['group'][0]} bundle {a['group'][1]}")
        if a.get("restarts"):
            notes.append(f"{a['restarts']} restart(s)")
        waiting = [w for w in a.get("waiting_on") or [] if w != "resources"]
        if waiting:
            notes.append("awaits " + ", ".join(waiting))
        elif a["state"] == "pending":
            notes.append("waits for resources (see pending requests)")
        rows.append(
            [
                a["name"] or "-",
                a["class"],
                where,
                a["state"],
                a["id"],
                _clip("; ".join(notes), width),
            ]
        )
    if rows:
        out += table(["name", "class", "where", "state", "id", "notes"], rows)
    return out


# ----------------------------------------------------------------------------------- results


def render_results(
    experiment: Experiment,
    metric: str | None,
    mode: str | None,
    best: TrialSummary | None,
    note: str | None,
    width: int = 100,
) -> str:
    """The text of ``actorrt results``."""
    trials = experiment.trials
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.status] = counts.get(t.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    state = "running now" if experiment.running else "not running"
    lines = [
        f"Experiment {experiment.path} ({state})",
        f"  {len(trials)} trial(s): {summary}",
        "",
    ]
    # One column per config key, in the param space's order (params.json keeps it), whole.
    columns: list[str] = []
    for t in trials:
        for key in flatten(t.config or {}):
            if key not in columns:
                columns.append(key)
    rows = []
    for t in trials:
        value = t.metric(metric) if metric else None
        flat = flatten(t.config) if t.config is not None else None
        rows.append([
            t.name, t.status, str(t.iterations),
            "-" if value is None else _number(value),
            *[_config_value(flat, key) for key in columns],
        ])  # fmt: skip
    header = ["trial", "status", "iter", metric or "metric", *columns]
    lines += table(header, rows, indent="", right=(2, 3))
    lines.append("")
    if best is not None and metric is not None:
        shown = _number(best.metric(metric))
        lines.append(f"Best trial by {metric} ({mode}): {best.name} ({metric}={shown})")
        lines.append(f"  config: {_config_text(best.config)}")
        lines.append(f"  path: {best.path}")
    if note:
        lines += textwrap.wrap(note, width=width)
    lines += _errors(trials, width)
    problems = [(t.name, p) for t in trials for p in t.problems]
    if problems:
        lines += ["", "Problems reading the folder:"]
        lines += [f"  {name}: {p}" for name, p in problems]
    return "\n".join(lines).rstrip() + "\n"


def _errors(trials: Sequence[TrialSummary], width: int) -> list[str]:
    lines: list[str] = []
    errored = [t for t in trials if t.status == "error" and t.error is not None]
    if errored:
        lines += ["", f"Errors: {len(errored)}"]
        for t in errored:
            assert t.error is not None
            lines.append(f"  {t.name}: {_clip(t.error.headline, width * 2)}")
            lines += [f"    {_clip(m, width)}" for m in t.error.more]
            if t.error.fix:
                wrapped = textwrap.wrap("fix: " + t.error.fix, width=max(width - 4, 40))
                lines += ["    " + line for line in wrapped]
            elif t.error.config_error:
                lines.append("    a resource configuration error: retrying cannot help")
            if t.error.source:
                lines.append(f"    full traceback: {t.error.source}")
    return lines


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isfinite(value) and float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def _config_value(flat: Mapping[str, Any] | None, key: str) -> str:
    if flat is None:
        return "?"
    if key not in flat:
        return "-"
    return json.dumps(flat[key], default=repr)


def _config_text(config: Mapping[str, Any] | None) -> str:
    if config is None:
        return "?"
    return ", ".join(f"{k}={json.dumps(v, default=repr)}" for k, v in flatten(config).items())


def results_json(
    experiment: Experiment,
    metric: str | None,
    mode: str | None,
    best: TrialSummary | None,
    note: str | None,
) -> dict[str, Any]:
    """What ``actorrt results --json`` prints."""
    return {
        "path": experiment.path,
        "running": experiment.running,
        "journal": experiment.journal,
        "metric": metric,
        "mode": mode,
        "best": best.name if best is not None else None,
        "note": note,
        "trials": [
            {
                "name": t.name,
                "path": t.path,
                "status": t.status,
                "iterations": t.iterations,
                "num_results": t.num_results,
                "metric": t.metric(metric) if metric else None,
                "config": t.config,
                "last_result": t.last_result,
                "error": None
                if t.error is None
                else {
                    "type": t.error.kind,
                    "headline": t.error.headline,
                    "more": t.error.more,
                    "fix": t.error.fix,
                    "config_error": t.error.config_error,
                    "source": t.error.source,
                },
                "problems": t.problems,
            }
            for t in experiment.trials
        ],
    }
