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
LAYERS: list[tuple[float, str, tuple[str, ...]]] = [
    (0, "errors", ("actorrt._errors",)),
    (0, "owned", ("actorrt._owned",)),
    (0, "notebook", ("actorrt._notebook",)),
    (0, "moved", ("actorrt._moved",)),
    (1, "wire", ("actorrt._wire",)),
    (1, "resources", ("actorrt.resources",)),
    (2, "core", ("actorrt._core",)),
    (3, "processes", ("actorrt._processes",)),
    (4, "control", ("actorrt._control",)),
    (4, "cluster", ("actorrt._cluster",)),
    (4.5, "dashboard", ("actorrt.dashboard",)),
    (
        5,
        "api",
        (
            "actorrt",  # the package's __init__: the public face
            "=actorrt._runtime",
            "actorrt._runtime._root",
            "actorrt._runtime._api",
            "actorrt._runtime._delegation",
            "actorrt._roles",
            "actorrt._runtime._sync",
            "actorrt._runtime._wait",
            "actorrt._runtime._tasks",
            "actorrt._runtime._task_lanes",
            "actorrt._runtime._task_streams",
            "actorrt._runtime._objects",
            "actorrt._runtime._actor_pool",
            "actorrt._runtime._lookup",
            "actorrt._runtime._ray_init",
            "actorrt._ray_names",
            "actorrt._sigterm",
        ),
    ),
    (6, "shared", ("actorrt._shared",)),
    # Tune's inner layers (its package docstring names them), bottom to top.
    (
        7.0,
        "tune.types",
        (
            "actorrt.tune.error",
            "actorrt.tune.registry",
            "actorrt.tune.result",
            "actorrt.tune.execution",
            "actorrt.tune.experiment",
            "actorrt.tune.progress_reporter",
            "actorrt.tune.stopper",
            "actorrt.tune.search._samplers",
            "actorrt.tune.search.sample",
            "actorrt.tune.search.variant_generator",
            "actorrt.tune.trainable.trainable",
            "=actorrt.tune._controller",
            "actorrt.tune._controller._trial_config",
            "actorrt.tune._controller._storage",
            "actorrt.tune._controller._syncer",
            "actorrt.tune._controller._experiment_state",
            "=actorrt.tune._worker",
            "actorrt.tune._worker._checkpoint_dirs",
            "actorrt.tune._worker._workdir",
            "actorrt.tune._worker._trial_log",
            "actorrt.tune._worker._spec",
        ),
    ),
    (7.1, "tune.search", ("actorrt.tune.search", "actorrt.tune.schedulers")),
    (
        7.2,
        "tune.settings",
        (
            "actorrt.tune.callback",
            "actorrt.tune.logger",
            "actorrt.tune.tune_config",
            "actorrt.tune._controller._view",
            "actorrt.tune._controller._progress",
        ),
    ),
    (
        7.3,
        "tune.trial",
        (
            "actorrt.tune.trainable",
            "actorrt.tune.context",
            "actorrt.tune.utils",
            "actorrt.tune._worker._trial_actor",
            "actorrt.tune._controller._resize",
            "actorrt.tune._controller._bus",
        ),
    ),
    (
        7.4,
        "tune.records",
        (
            "actorrt.tune.analysis",
            "actorrt.tune.result_grid",
            "actorrt.tune._controller._recorder",
            "actorrt.tune._controller._recover",
            "actorrt.tune._controller._prepare",
            "actorrt.tune._controller._restore",
            "actorrt.tune._controller._saved_results",
        ),
    ),
    (
        7.5,
        "tune.controller",
        (
            "actorrt.tune._controller._result_checks",
            "actorrt.tune._controller._controller_state",
            "actorrt.tune._controller._trial_launch",
            "actorrt.tune._controller._scheduler_actions",
            "actorrt.tune._controller._result_handling",
            "actorrt.tune._controller._dashboard",
            "actorrt.tune._controller._controller",
        ),
    ),
    (7.6, "tune.entry", ("=actorrt.tune", "actorrt.tune.tuner", "actorrt.tune.tune")),
    # Train's inner layers, bottom to top (its package docstring names them).
    (
        7.0,
        "train.types",
        (
            "actorrt.train._unsupported",
            "actorrt.train.constants",
            "actorrt.train._extras",
            "actorrt.train.error",
            "actorrt.train.backend",
            "actorrt.train._callback",
            "actorrt.train._checkpoint_store",
            "actorrt.train._checkpoint_book",
            "actorrt.train._rendezvous",
            "actorrt.train._run_config",
            "actorrt.train._scaling",
            "actorrt.train._placement",
            "actorrt.train._recorder",
            "actorrt.train._result",
            "actorrt.train.torch.config",
            "actorrt.train.lightning._pl",
            "actorrt.train.huggingface.transformers._hf",
        ),
    ),
    (
        7.1,
        "train.worker",
        (
            "actorrt.train.context",
            "actorrt.train.collective",
            "actorrt.train._data",
            "actorrt.train._worker",
            "actorrt.train.torch.train_loop_utils",
            "actorrt.train._gbdt_report",
            "actorrt.train.xgboost._xgboost_utils",
            "actorrt.train.xgboost.config",
            "actorrt.train.lightgbm._lightgbm_utils",
            "actorrt.train.lightgbm.config",
            "actorrt.train.lightning",
            "actorrt.train.huggingface.transformers",
        ),
    ),
    (7.2, "train.gang", ("actorrt.train._gang", "actorrt.train._worker_group")),
    (
        7.3,
        "train.trainer",
        (
            "actorrt.train.data_parallel_trainer",
            "actorrt.train.torch.torch_trainer",
            "actorrt.train._gbdt_trainer",
            "actorrt.train.xgboost.xgboost_trainer",
            "actorrt.train.lightgbm.lightgbm_trainer",
        ),
    ),
    (
        7.4,
        "train.entry",
        (
            "=actorrt.train",
            "=actorrt.train.torch",
            "=actorrt.train.lightning",
            "=actorrt.train.huggingface",
            "=actorrt.train.huggingface.transformers",
            "=actorrt.train.xgboost",
            "=actorrt.train.lightgbm",
        ),
    ),
    # Ray Train V2's own paths: the same objects, above the public faces they import.
    (7.5, "train.v2", ("actorrt.train.v2",)),
    (7.0, "util", ("actorrt.util",)),
    (
        8,
        "apps",
        (
            "actorrt.air",
            # Tune's framework callbacks are Train's report callbacks (train.report is
            # tune.report in a trial): glue over both libraries, as actorrt.air is.
            "actorrt.tune.integration",
            "actorrt.examples",
            "actorrt.tune.examples",
            "actorrt.train.examples",
            "actorrt.testing",
            "=actorrt._cli",
            "actorrt._cli._main",
            "actorrt._cli._format",
            "actorrt._cli._dashboard",
            "actorrt._cli._cluster",
            "actorrt._cli._experiment",
            "actorrt._cli._error_summary",
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


def layer_of(module: str) -> tuple[float, str]:
    best: tuple[int, float, str] | None = None  # (prefix length, level, group)
    for level, group, prefixes in LAYERS:
        for prefix in prefixes:
            if prefix == "actorrt":
                matches = module == "actorrt"  # the package itself, not everything in it
            elif prefix.startswith("="):
                matches = module == prefix[1:]  # a package's __init__ only
            else:
                matches = module == prefix or module.startswith(prefix + ".")
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), level, group)
    if best is None:
        raise AssertionError(
            f"module {module} is in no layer: add it to LAYERS in tests/project/test_layering.py "
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


def libraries_cross(group: str, target_group: str) -> bool:
    """Tune and Train are two libraries side by side: neither imports the other."""
    libraries = {group.split(".")[0], target_group.split(".")[0]}
    return libraries == {"tune", "train"}


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
            if allowed and (group, target_group) not in FORBIDDEN and not libraries_cross(
                group, target_group
            ):
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
    assert any(t.startswith("actorrt._core") for t, _ in GRAPH["actorrt._runtime._root"])
    assert strongly_connected({"a": ["b"], "b": ["a"], "c": []}) != [["a"], ["b"], ["c"]]
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("actorrt._somewhere_new")


# The libraries are built on the public face, as any user library could be: below their own
# tier they use only these (``_ray_names`` says which Ray names are missing; ``_sigterm`` is
# the one SIGTERM mechanism that ``actorrt.run``, ``actorrt.init`` and ``Tuner.fit`` share;
# ``_owned`` the one check that a folder is this user's alone, shared with the runtime's
# discovery; ``_wire._pickling`` the one pickler, which keeps the file names of user code;
# ``_notebook`` the one test of a Jupyter kernel's cell, where blocking calls may wait;
# ``dashboard`` the registry where a sweep shows itself on the dashboard).
LIBRARY_BASE = (
    "actorrt", "actorrt.resources", "actorrt._shared", "actorrt._ray_names", "actorrt._sigterm",
    "actorrt._owned", "actorrt._wire._pickling", "actorrt._notebook", "actorrt.dashboard",
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



def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports_of(module: str) -> set[str]:
    """The modules ``module``'s code can import when it runs: every import but those under
    ``if TYPE_CHECKING:`` (imports inside functions count: they run when called)."""
    path = MODULES[module]
    skipped: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skipped.update(
                inner.lineno for stmt in node.body for inner in ast.walk(stmt)
                if isinstance(inner, ast.Import | ast.ImportFrom)
            )
    return {target for target, line in GRAPH[module] if line not in skipped}


def imported_by(roots: list[str]) -> set[str]:
    """Every module that importing ``roots`` can load: the closure of their runtime imports,
    with the packages each module sits in (importing ``a.b.c`` runs ``a.b``'s ``__init__``)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo.extend(
            package
            for package in (".".join(parts[:n]) for n in range(1, len(parts)))
            if package in MODULES
        )
        todo.extend(runtime_imports_of(module))
    return seen


def test_a_trials_worker_side_imports_nothing_from_the_controller_side() -> None:
    worker = [m for m in MODULES if m.startswith("actorrt.tune._worker")]
    assert "actorrt.tune._worker._trial_actor" in worker
    controller = sorted(
        m for m in imported_by(worker) if m.startswith("actorrt.tune._controller")
    )
    assert not controller, f"the trial side reaches the controller side: {controller}"
