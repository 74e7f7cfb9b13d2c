"""Module paths of earlier releases, for what was pickled under them (an experiment's folder).

An experiment folder holds pickles (the tuner, a searcher's state, trainables wrapped by
``with_parameters``), and a pickle names each class by its module. Tune's and Train's
modules have moved to Ray's paths since, so an experiment made by an earlier release names
modules that no longer exist. :func:`install` adds an import finder that gives each old
path the module now at the new one: ``Tuner.restore`` of an old folder finds its classes.
Nothing else imports these paths; new code is never written against them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence

__all__ = ["MOVED", "SPLIT", "install"]

# old module path -> the module that holds its names now
MOVED: dict[str, str] = {
    "actorrt.train._backend": "actorrt.train.backend",
    "actorrt.train._errors": "actorrt.train.error",
    "actorrt.train._session": "actorrt.train.context",
    "actorrt.train._trainer": "actorrt.train.data_parallel_trainer",
    "actorrt.train.torch._config": "actorrt.train.torch.config",
    "actorrt.train.torch._prepare": "actorrt.train.torch.train_loop_utils",
    "actorrt.train.torch._trainer": "actorrt.train.torch.torch_trainer",
    "actorrt.tune._analysis": "actorrt.tune.analysis.experiment_analysis",
    "actorrt.tune._ax": "actorrt.tune.search.ax.ax_search",
    "actorrt.tune._bayesopt": "actorrt.tune.search.bayesopt.bayesopt_search",
    "actorrt.tune._bohb": "actorrt.tune.search.bohb.bohb_search",
    "actorrt.tune._bus": "actorrt.tune._controller._bus",
    "actorrt.tune._callbacks": "actorrt.tune.callback",
    "actorrt.tune._checkpoint_dirs": "actorrt.tune._worker._checkpoint_dirs",
    "actorrt.tune._config": "actorrt.tune.tune_config",
    "actorrt.tune._controller_state": "actorrt.tune._controller._controller_state",
    "actorrt.tune._diagnose": "actorrt.tune.utils.util",
    "actorrt.tune._errors": "actorrt.tune.error",
    "actorrt.tune._experiment_state": "actorrt.tune._controller._experiment_state",
    "actorrt.tune._gpu_wait": "actorrt.tune.utils._gpu_wait",
    "actorrt.tune._hyperband": "actorrt.tune.schedulers.hyperband",
    "actorrt.tune._hyperopt": "actorrt.tune.search.hyperopt.hyperopt_search",
    "actorrt.tune._library_search": "actorrt.tune.search._library_search",
    "actorrt.tune._loggers": "actorrt.tune.logger.tensorboardx",
    "actorrt.tune._nevergrad": "actorrt.tune.search.nevergrad.nevergrad_search",
    "actorrt.tune._optuna": "actorrt.tune.search.optuna.optuna_search",
    "actorrt.tune._pb2": "actorrt.tune.schedulers.pb2",
    "actorrt.tune._pbt": "actorrt.tune.schedulers.pbt",
    "actorrt.tune._placement_group_factory": "actorrt.tune.execution.placement_groups",
    "actorrt.tune._prepare": "actorrt.tune._controller._prepare",
    "actorrt.tune._progress": "actorrt.tune._controller._progress",
    "actorrt.tune._recorder": "actorrt.tune._controller._recorder",
    "actorrt.tune._recover": "actorrt.tune._controller._recover",
    "actorrt.tune._repeater": "actorrt.tune.search.repeater",
    "actorrt.tune._reporters": "actorrt.tune.progress_reporter",
    "actorrt.tune._resize": "actorrt.tune._controller._resize",
    "actorrt.tune._resource_changing": "actorrt.tune.schedulers.resource_changing_scheduler",
    "actorrt.tune._resources": "actorrt.tune.trainable._resources",
    "actorrt.tune._restore": "actorrt.tune._controller._restore",
    "actorrt.tune._result": "actorrt.tune.result_grid",
    "actorrt.tune._result_checks": "actorrt.tune._controller._result_checks",
    "actorrt.tune._result_handling": "actorrt.tune._controller._result_handling",
    "actorrt.tune._run": "actorrt.tune.tune",
    "actorrt.tune._sample": "actorrt.tune.search.sample",
    "actorrt.tune._saved_results": "actorrt.tune._controller._saved_results",
    "actorrt.tune._scheduler_actions": "actorrt.tune._controller._scheduler_actions",
    "actorrt.tune._session": "actorrt.tune.context",
    "actorrt.tune._storage": "actorrt.tune._controller._storage",
    "actorrt.tune._syncer": "actorrt.tune._controller._syncer",
    "actorrt.tune._trainable": "actorrt.tune.trainable.trainable",
    "actorrt.tune._trial": "actorrt.tune.experiment.trial",
    "actorrt.tune._trial_actor": "actorrt.tune._worker._trial_actor",
    "actorrt.tune._trial_config": "actorrt.tune._controller._trial_config",
    "actorrt.tune._trial_launch": "actorrt.tune._controller._trial_launch",
    "actorrt.tune._trial_log": "actorrt.tune._worker._trial_log",
    "actorrt.tune._tuner": "actorrt.tune.tuner",
    "actorrt.tune._variants": "actorrt.tune.search.variant_generator",
    "actorrt.tune._view": "actorrt.tune._controller._view",
    "actorrt.tune._with_parameters": "actorrt.tune.trainable.util",
    "actorrt.tune._workdir": "actorrt.tune._worker._workdir",
    "actorrt.tune._zoopt": "actorrt.tune.search.zoopt.zoopt_search",
}

# old module path -> the modules its names went to
SPLIT: dict[str, tuple[str, ...]] = {
    "actorrt.tune._schedulers": tuple(
        f"actorrt.tune.schedulers.{m}"
        for m in ("trial_scheduler", "async_hyperband", "median_stopping_rule")
    ),
    "actorrt.tune._search": tuple(
        f"actorrt.tune.search.{m}"
        for m in ("searcher", "basic_variant", "concurrency_limiter", "variant_generator")
    ),
    "actorrt.tune._stopper": tuple(
        f"actorrt.tune.stopper.{m}"
        for m in ("stopper", "noop", "function_stopper", "maximum_iteration", "trial_plateau",
                  "timeout", "experiment_plateau", "_from_config")
    ),
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of :data:`MOVED`; loads it as the module at the new one."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED and fullname not in SPLIT:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name in SPLIT:
            return _Split(spec.name, SPLIT[spec.name])
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        pass  # the module at the new path is loaded already


class _Split(types.ModuleType):
    """An old module whose names went to several modules: each name is looked up in them,
    in order."""

    def __init__(self, name: str, modules: tuple[str, ...]) -> None:
        super().__init__(name)
        self._modules = modules

    def __getattr__(self, name: str) -> object:
        if not name.startswith("__"):
            for path in self._modules:
                found = vars(importlib.import_module(path))
                if name in found:
                    return found[name]
        raise AttributeError(f"module {self.__name__!r} (now {self._modules}) has no {name!r}")


_ALIAS = _Alias()


def install() -> None:
    """Let old module paths import (once per process; after every other finder)."""
    if _ALIAS not in sys.meta_path:
        sys.meta_path.append(_ALIAS)
