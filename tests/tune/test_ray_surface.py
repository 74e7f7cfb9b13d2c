"""Every public module path of Ray's ``ray.tune`` and ``ray.train``: it imports as
``actorrt.tune...`` / ``actorrt.train...``, or, where actorrt deliberately lacks it, raises
the porting error, which names docs/porting.md, where the path is listed with the reason.

The list, with each path's status, is ray_surface.txt beside this file.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
PORTING = HERE.parent.parent / "docs" / "porting.md"


def surface() -> list[tuple[str, str]]:
    rows = []
    for line in (HERE / "ray_surface.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            path, status = line.split()
            assert status in ("here", "absent"), line
            rows.append((path, status))
    return rows


SURFACE = surface()
PRESENT = [path for path, status in SURFACE if status == "here"]
ABSENT = [path for path, status in SURFACE if status == "absent"]


def ours(ray_path: str) -> str:
    assert ray_path == "ray" or ray_path.startswith("ray."), ray_path
    return "actorrt" + ray_path[len("ray"):]


def test_the_list_is_ray_s_tune_and_train_with_no_path_twice() -> None:
    paths = [path for path, _ in SURFACE]
    assert len(paths) == len(set(paths))
    assert all(p.startswith(("ray.tune", "ray.train")) for p in paths)
    print(f"Ray module paths: {len(PRESENT)} of {len(SURFACE)} import, {len(ABSENT)} absent")


def test_every_present_path_imports() -> None:
    # In a fresh interpreter, so what another test imported first cannot hide a failure.
    script = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    done = subprocess.run(
        [sys.executable, "-c", script, *[ours(p) for p in PRESENT]],
        capture_output=True, text=True, timeout=120, cwd=HERE.parent.parent,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("ray_path", ABSENT)
def test_every_absent_path_raises_the_porting_error(ray_path: str) -> None:
    with pytest.raises(ImportError) as raised:
        importlib.import_module(ours(ray_path))
    assert "docs/porting.md" in str(raised.value), str(raised.value)


def test_every_absent_path_is_listed_in_porting_md_with_a_reason() -> None:
    text = PORTING.read_text()
    listed = {
        line.split("|")[1].strip().strip("`")
        for line in text.splitlines()
        if line.startswith("| `ray.")
    }
    # A row may name a package for everything under it (`ray.tune.integration` covers
    # `ray.tune.integration.keras`).
    missing = [
        path for path in ABSENT
        if not any(path == row or path.startswith(row + ".") for row in listed)
    ]
    assert not missing, f"absent Ray paths without a row in docs/porting.md: {missing}"


def test_every_public_module_of_ours_is_on_the_list() -> None:
    # A public module added at a Ray path joins the list, so the list stays Ray's surface;
    # the example modules are left out, as the list leaves out Ray's.
    package = HERE.parent.parent / "actorrt"
    listed = {path for path, _ in SURFACE}
    unlisted = []
    for file in sorted(package.glob("t*/**/*.py")):
        parts = file.relative_to(package).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if parts[0] not in ("tune", "train") or "examples" in parts:
            continue
        if not any(part.startswith("_") for part in parts):
            ray_path = ".".join(("ray", *parts))
            if ray_path not in listed:
                unlisted.append(ray_path)
    assert not unlisted, f"public modules at Ray paths missing from ray_surface.txt: {unlisted}"
