"""The package's import graph: no cycle, and no import from a layer to one above it.

The layers are the ones ``actorrt/__init__.py`` names at its top. Every ``import`` and
``from ... import`` statement counts, wherever it is (module level, inside a function, or
under ``if TYPE_CHECKING:``): a type-only import is still a dependency a reader must follow.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import actorrt

PACKAGE = Path(actorrt.__file__).parent

# (level, group, module prefixes). A module may import its own group, or a group of a lower
# level; never a higher level, nor another group of the same level.
LAYERS: list[tuple[int, str, tuple[str, ...]]] = [
    (0, "errors", ("actorrt._errors",)),
    (0, "owned", ("actorrt._owned",)),
    (0, "notebook", ("actorrt._notebook",)),
    (1, "wire", ("actorrt._wire",)),
    (1, "resources", ("actorrt.resources",)),
    (2, "core", ("actorrt._core",)),
    (3, "placement", ("actorrt._placement",)),
    (4, "control", ("actorrt._control",)),
    (4, "cluster", ("actorrt._cluster",)),
    (
        5,
        "api",
        (
            "actorrt",  # the package's __init__: the public face
            "actorrt._runtime",
            "actorrt._runtime_api",
            "actorrt._runtime_role",
            "actorrt._roles",
            "actorrt._sync",
            "actorrt._wait",
            "actorrt._tasks",
            "actorrt._objects",
            "actorrt._actor_pool",
            "actorrt._lookup",
            "actorrt._ray_init",
            "actorrt._ray_names",
            "actorrt._sigterm",
        ),
    ),
    (6, "shared", ("actorrt._shared",)),
    (7, "tune", ("actorrt.tune",)),
    (7, "train", ("actorrt.train",)),
    (7, "util", ("actorrt.util",)),
    (
        8,
        "apps",
        (
            "actorrt.air",
            "actorrt.examples",
            "actorrt.testing",
            "actorrt._cli",
            "actorrt._cli_format",
            "actorrt._cli_cluster",
            "actorrt._experiment",
            "actorrt._error_summary",
            "actorrt.__main__",
        ),
    ),
]


# Pairs that the levels alone would allow but the design does not: the actor core never
# knows how a message travelled, so it does not import the wire.
FORBIDDEN: set[tuple[str, str]] = {("core", "wire")}


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


MODULES = module_names()


def layer_of(module: str) -> tuple[int, str]:
    best: tuple[int, int, str] | None = None  # (prefix length, level, group)
    for level, group, prefixes in LAYERS:
        for prefix in prefixes:
            if prefix == "actorrt":
                matches = module == "actorrt"  # the package itself, not everything in it
            else:
                matches = module == prefix or module.startswith(prefix + ".")
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), level, group)
    if best is None:
        raise AssertionError(
            f"module {module} is in no layer: add it to LAYERS in tests/test_layering.py "
            "and to the layering note at the top of actorrt/__init__.py"
        )
    return best[1], best[2]


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import statement of ``module`` inside the package."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "actorrt" and not target.startswith("actorrt."):
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found = _resolve(full) if full in MODULES else _resolve(target)
                if found is not None and found != module:
                    yield found, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "actorrt" or alias.name.startswith("actorrt."):
                    found = _resolve(alias.name)
                    if found is not None and found != module:
                        yield found, node.lineno


GRAPH = {module: sorted(set(imports_of(module))) for module in MODULES}


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_no_import_goes_up_or_sideways() -> None:
    bad = []
    for module, targets in GRAPH.items():
        level, group = layer_of(module)
        for target, line in targets:
            target_level, target_group = layer_of(target)
            allowed = target_group == group or target_level < level
            if allowed and (group, target_group) not in FORBIDDEN:
                continue
            bad.append(
                f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}: {module} ({group}, "
                f"layer {level}) imports {target} ({target_group}, layer {target_level})"
            )
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            groups.append(group)

    for node in graph:
        if node not in index:
            visit(node)
    return groups


def test_no_import_cycle() -> None:
    graph = {module: [target for target, _ in targets] for module, targets in GRAPH.items()}
    cycles = [sorted(group) for group in strongly_connected(graph) if len(group) > 1]
    assert not cycles, "import cycles (TYPE_CHECKING imports count):\n" + "\n".join(
        ", ".join(group) for group in cycles
    )


def test_the_checker_sees_what_it_must() -> None:
    # The graph is built from real statements: the runtime imports the core, and the core
    # never the runtime.
    assert any(t.startswith("actorrt._core") for t, _ in GRAPH["actorrt._runtime"])
    assert strongly_connected({"a": ["b"], "b": ["a"], "c": []}) != [["a"], ["b"], ["c"]]
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("actorrt._somewhere_new")


# The libraries are built on the public face, as any user library could be: below their own
# tier they use only these (``_ray_names`` says which Ray names are missing; ``_sigterm`` is
# the one SIGTERM mechanism that ``actorrt.run``, ``actorrt.init`` and ``Tuner.fit`` share;
# ``_owned`` the one check that a folder is this user's alone, shared with the runtime's
# discovery; ``_wire._pickling`` the one pickler, which keeps the file names of user code;
# ``_notebook`` the one test of a Jupyter kernel's cell, where blocking calls may wait).
LIBRARY_BASE = (
    "actorrt", "actorrt.resources", "actorrt._shared", "actorrt._ray_names", "actorrt._sigterm",
    "actorrt._owned", "actorrt._wire._pickling", "actorrt._notebook",
)


def test_libraries_use_only_the_public_api_below_them() -> None:
    bad = []
    for module, targets in GRAPH.items():
        if layer_of(module)[1] not in ("shared", "tune", "train"):
            continue
        for target, line in targets:
            at_or_above = layer_of(target)[0] >= layer_of(module)[0]
            public = target == "actorrt" or any(
                target == base or target.startswith(base + ".") for base in LIBRARY_BASE[1:]
            )
            if at_or_above or public:
                continue
            bad.append(f"{module}:{line} imports {target}")
    assert not bad, "libraries reaching past the public API:\n" + "\n".join(bad)
