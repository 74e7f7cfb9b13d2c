"""The broker's logic reads nothing of the machine: only the probe modules do.

``actorrt.resources`` is driven by events so that a simulation (or, later, remote nodes)
can feed it; reading CPUs, cgroups or NVML belongs to ``_probe`` and ``_probe_gpus`` alone.
"""

from __future__ import annotations

import ast
import pathlib

import actorrt.resources

PROBES = {"_probe.py", "_probe_gpus.py"}
# Modules through which code reads the machine, the clock or the process.
SYSTEM = {"os", "sys", "time", "subprocess", "socket", "threading", "asyncio", "pynvml",
          "json", "pathlib", "shutil", "platform", "ctypes", "psutil"}


def _system_uses(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in SYSTEM]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in SYSTEM:
                found.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            if f"{node.module}.py" in PROBES:
                found.append(f".{node.module}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open":
            found.append("open()")
    return found


def test_only_the_probe_modules_read_the_machine() -> None:
    package = pathlib.Path(actorrt.resources.__file__).parent
    modules = sorted(p for p in package.glob("*.py") if p.name not in PROBES)
    assert len(modules) > 10
    offenders = {
        p.name: uses
        for p in modules
        if p.name != "__init__.py" and (uses := _system_uses(p))
    }
    assert offenders == {}


def test_probes_exist_and_do_the_reading() -> None:
    package = pathlib.Path(actorrt.resources.__file__).parent
    assert "os" in _system_uses(package / "_probe.py")
    assert "pynvml" in (package / "_probe_gpus.py").read_text(encoding="utf-8")
