"""Ray names that actorrt does not have: a clear ``AttributeError`` instead of a bare one.

``actorrt``, ``actorrt.tune`` and ``actorrt.train`` look a missing attribute up here (from
their module ``__getattr__``), so a ported script that uses, say, ``ray.remote`` learns that
actorrt has no such thing, what to use instead where there is something, and that
docs/porting.md lists what differs.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

__all__ = ["MissingRayModules", "install_module_finder", "missing"]

PORTING = "see docs/porting.md for what a Ray script needs to change"

_ACTORRT = {
    "remote": "decorate a class with @actorrt.actor (start one with `await Cls.spawn()`) "
              "and a function with @actorrt.task (call it: `f(x)` sends at once and returns "
              "a handle to await or actorrt.get)",
    "kill": "stop an actor with `await ref.stop()` or `await ref.kill()`",
    "cancel": "give up an ask or a task call with handle.cancel()",
    "get_runtime_context": "use actorrt.get_context()",
    "nodes": "there is no node list in a program: `actorrt status --address auto` shows "
    "the cluster's nodes, actorrt.cluster_resources() their sum",
    "method": "actor methods need no decorator",
    "data": "Ray Data is not provided",
    "serve": "Ray Serve is not provided",
    "rllib": "RLlib is not provided",
    "air": "import actorrt.air (Ray 2.7's names) explicitly: `from actorrt import air`",
    "timeline": "there is no timeline",
    "exceptions": "errors are actorrt.ActorError and its subclasses",
    "job_config": "there are no Ray jobs",
    "autoscaler": "actorrt has no autoscaler: nodes join with `actorrt start --address` "
    "(docs/cluster.md)",
    "client": "there is no Ray Client",
}

_TUNE = {
    "ResumeConfig": "use Tuner.restore(path, trainable, resume_errored=..., "
                    "restart_errored=...)",
    "create_searcher": "build the searcher directly (tune.search.optuna.OptunaSearch, ...)",
    "create_scheduler": "build the scheduler directly (tune.schedulers.ASHAScheduler, ...)",
    "Trial": "trials are read through ExperimentAnalysis.trials and Result objects",
    "is_session_enabled": "tune.get_context().get_trial_id() is None outside a trial",
}

_TRAIN = {
    "SyncConfig": "experiments are written to local storage only: nothing to sync",
    "DataConfig": "Ray Data is not provided",
    "xgboost": "import actorrt.train.xgboost explicitly (it needs 'actorrt[xgboost]')",
    "lightgbm": "import actorrt.train.lightgbm explicitly (it needs 'actorrt[lightgbm]')",
    "tensorflow": "train.tensorflow is not provided",
    "horovod": "train.horovod is not provided",
}

_UTIL = {
    "remove_placement_group": "await pg.remove() (actorrt.get(pg.remove()) in sync code)",
    "get_placement_group": "keep the PlacementGroup that placement_group() returned; groups "
                           "have no names",
    "get_current_placement_group": "actorrt.get_context().placement says which group and "
                                   "bundle the actor runs in",
    "placement_group_table": "actorrt.pending_requests() and `actorrt status` show groups",
    "list_named_actors": "named actors are looked up one by one: actorrt.get_actor(name)",
    "inspect_serializability": "values travel pickled with cloudpickle; a refused one raises "
                               "actorrt.PickleRefusedError naming it",
}

_TABLES = {
    "actorrt": _ACTORRT,
    "actorrt.tune": _TUNE,
    "actorrt.train": _TRAIN,
    "actorrt.util": _UTIL,
}
_RAY_MODULES = {
    "actorrt": "ray",
    "actorrt.tune": "ray.tune",
    "actorrt.train": "ray.train",
    "actorrt.util": "ray.util",
}


def missing(module: str, name: str) -> AttributeError:
    """The error for ``module.name`` that does not exist (to be raised by the caller)."""
    if name.startswith("__"):
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    hint = _TABLES.get(module, {}).get(name)
    ray = f"{_RAY_MODULES.get(module, module)}.{name}"
    if hint:
        text = f"actorrt does not have {ray} ({module}.{name}): {hint}; {PORTING}"
    else:
        text = (
            f"module {module!r} has no attribute {name!r}; if this is Ray's {ray}, actorrt "
            f"does not have it: {PORTING}"
        )
    error = AttributeError(text)
    error.name = name
    return error


# Ray modules a ported script may import that actorrt does not have, with what to do.
_MODULE_HINTS = {
    "actorrt.tune.integration": "of Tune's framework integrations, xgboost, lightgbm "
                                "and pytorch_lightning are provided "
                                "(actorrt.tune.integration.xgboost, .lightgbm, "
                                ".pytorch_lightning); for others call tune.report from "
                                "your own callback",
    "actorrt.tune.execution": "Tune's execution internals are not public (the controller is "
                              "actorrt.tune._controller); PlacementGroupFactory is in "
                              "actorrt.tune.execution.placement_groups",
    "actorrt.tune.impl": "Ray's Tuner internals: actorrt.tune.tuner.Tuner is the whole API",
    "actorrt.tune.cli": "use `actorrt results PATH` (docs/cli.md)",
    "actorrt.train.v2": "actorrt.train is Ray Train V2's API; of V2's own paths, "
                        "ray.train.v2.api (callback, config, context, data_parallel_trainer, "
                        "exceptions, result, reported_checkpoint, train_fn_utils), "
                        ".torch, .lightning and .xgboost are here: import the rest from "
                        "ray.train",
    "actorrt.train.tensorflow": "train.tensorflow is not provided",
    "actorrt.train.horovod": "train.horovod is not provided",
    "actorrt.data": "Ray Data is not provided",
    "actorrt.util.scheduling_strategies": "write placement=pg.bundle(i) (or placement=pg) "
                                          "in Cls.options() instead of a scheduling strategy",
    "actorrt.util.queue": "ray.util.queue is not provided: an actor holding a "
                          "collections.deque serves as one",
    "actorrt.util.multiprocessing": "ray.util.multiprocessing is not provided: use "
                                    "actorrt.util.ActorPool",
    "actorrt.serve": "Ray Serve is not provided",
    "actorrt.rllib": "RLlib is not provided",
}


class MissingRayModules(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: a public ``actorrt.*`` module that no finder found is
    one of Ray's that actorrt lacks, and the ``ModuleNotFoundError`` says so and points to
    docs/porting.md (instead of Python's bare "No module named ...")."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        parts = fullname.split(".")
        if parts[0] != "actorrt" or len(parts) < 2 or any(p.startswith("_") for p in parts):
            return None
        hint = next(
            (h for prefix, h in _MODULE_HINTS.items()
             if fullname == prefix or fullname.startswith(prefix + ".")),
            None,
        )
        ray = "ray." + ".".join(parts[1:])
        text = (f"actorrt does not have {ray} ({fullname})"
                + (f": {hint}" if hint else "") + f"; {PORTING}")
        raise ModuleNotFoundError(text, name=fullname)


def install_module_finder() -> None:
    """Put :class:`MissingRayModules` last on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MissingRayModules) for f in sys.meta_path):
        sys.meta_path.append(MissingRayModules())
