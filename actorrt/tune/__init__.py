"""actorrt.tune: Ray Tune's API on actorrt's actors and broker.

A Ray Tune script ports by changing ``from ray import tune`` to ``from actorrt import tune``.
Every trial is a trial-driver actor in a worker process holding its resources as one
placement group, so a trial and the workers it declares are reserved atomically, and an
undeclared request that can never be met is an error in the results, not a hang.

This package is a library layer: it uses only the public ``actorrt`` API (and the pure
``actorrt.resources`` layer, for GPU discovery). Its modules are at Ray's paths (Ray's
``ray.tune.X`` is ``actorrt.tune.X``; tests/tune/test_ray_surface.py lists every one), and
its private machinery is in two packages: ``_controller`` (what runs an experiment in the
driver) and ``_worker`` (what a trial's worker process imports).

A Ray name that actorrt does not have raises an ``AttributeError`` that says so and points
to docs/porting.md; so does importing a Ray module that actorrt does not have. Names are
imported on first use (PEP 562), from the module that defines them: a trial's worker process
imports this package to run a trainable, and needs only the trial side (``_worker``,
``context``, ``trainable``, ``execution.placement_groups``), not the controller's.

Inside the package, modules form layers, bottom to top; a module imports only modules of
its own layer or of those below (never a higher one, not even for type checking: a lower
module that must call up names what it calls as a ``typing.Protocol`` or takes a callable),
and no two modules import each other (tests/project/test_layering.py checks it, and that the trial
side reaches nothing of the controller side):

1. Types, per-trial settings, search space: ``error``, ``registry``, ``result``,
   ``execution.placement_groups``, ``experiment`` (``trial``, ``_lifecycle``,
   ``experiment``), ``progress_reporter``, ``stopper``, ``search.sample``,
   ``search.variant_generator``, ``trainable.trainable``; the experiment folder and journal
   (``_controller._storage``, ``._syncer``, ``._experiment_state``, ``._trial_config``); a
   trial's folder, log and what crosses for an attempt (``_worker._checkpoint_dirs``,
   ``._workdir``, ``._trial_log``, ``._spec``).
2. Search algorithms and schedulers: ``search`` (with one package per library:
   ``search.optuna``, ``search.hyperopt``, ...) and ``schedulers``.
3. Experiment settings and what watches an experiment: ``callback``, ``logger``,
   ``tune_config`` (``RunConfig`` and ``TuneConfig`` hold searchers, schedulers and
   callbacks, so they sit above them), ``_controller._view``, ``_controller._progress``.
4. Running a trial: ``trainable``, ``context``, ``utils``, ``_worker._trial_actor``;
   ``_controller._resize``, ``_controller._bus``.
5. The experiment's records: ``analysis``, ``result_grid``, ``_controller._recorder``,
   ``._recover``, ``._prepare``, ``._restore``, ``._saved_results``.
6. The controller, built up as subclasses that each call only down:
   ``_controller._result_checks``, ``._controller_state``, ``._trial_launch``,
   ``._scheduler_actions``, ``._result_handling``, ``._dashboard`` (the sweep the dashboard
   shows), ``._controller``.
7. Entry points: ``tuner``, ``tune`` (``tune.run``), and this module.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from .._shared._checkpoint import Checkpoint as Checkpoint
    from . import logger as logger
    from . import result as result
    from . import schedulers as schedulers
    from . import search as search
    from . import stopper as stopper
    from . import utils as utils
    from ._controller._trial_config import CheckpointConfig as CheckpointConfig
    from ._controller._trial_config import FailureConfig as FailureConfig
    from .analysis.experiment_analysis import ExperimentAnalysis as ExperimentAnalysis
    from .callback import Callback as Callback
    from .context import StopTrial as StopTrial
    from .context import TuneContext as TuneContext
    from .context import get_checkpoint as get_checkpoint
    from .context import get_context as get_context
    from .context import report as report
    from .error import TuneError as TuneError
    from .execution.placement_groups import PlacementGroupFactory as PlacementGroupFactory
    from .experiment.experiment import Experiment as Experiment
    from .progress_reporter import CLIReporter as CLIReporter
    from .progress_reporter import JupyterNotebookReporter as JupyterNotebookReporter
    from .progress_reporter import ProgressReporter as ProgressReporter
    from .registry import register_env as register_env
    from .registry import register_trainable as register_trainable
    from .result_grid import Result as Result
    from .result_grid import ResultGrid as ResultGrid
    from .schedulers.trial_scheduler import TrialScheduler as TrialScheduler
    from .search.sample import Domain as Domain
    from .search.sample import choice as choice
    from .search.sample import grid_search as grid_search
    from .search.sample import lograndint as lograndint
    from .search.sample import loguniform as loguniform
    from .search.sample import qlograndint as qlograndint
    from .search.sample import qloguniform as qloguniform
    from .search.sample import qrandint as qrandint
    from .search.sample import qrandn as qrandn
    from .search.sample import quniform as quniform
    from .search.sample import randint as randint
    from .search.sample import randn as randn
    from .search.sample import sample_from as sample_from
    from .search.sample import uniform as uniform
    from .stopper.stopper import Stopper as Stopper
    from .trainable._resources import with_resources as with_resources
    from .trainable.trainable import Trainable as Trainable
    from .trainable.util import with_parameters as with_parameters
    from .tune import run as run
    from .tune import run_experiments as run_experiments
    from .tune_config import RunConfig as RunConfig
    from .tune_config import SyncConfig as SyncConfig
    from .tune_config import TuneConfig as TuneConfig
    from .tuner import Tuner as Tuner

__all__ = [
    "CLIReporter",
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "Domain",
    "Experiment",
    "ExperimentAnalysis",
    "FailureConfig",
    "JupyterNotebookReporter",
    "PlacementGroupFactory",
    "ProgressReporter",
    "Result",
    "ResultGrid",
    "RunConfig",
    "StopTrial",
    "Stopper",
    "SyncConfig",
    "Trainable",
    "TrialScheduler",
    "TuneConfig",
    "TuneContext",
    "TuneError",
    "Tuner",
    "choice",
    "get_checkpoint",
    "get_context",
    "grid_search",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "register_env",
    "register_trainable",
    "report",
    "run",
    "run_experiments",
    "sample_from",
    "uniform",
    "with_parameters",
    "with_resources",
]

# Ray's public submodules, imported on first use.
_SUBMODULES = frozenset({
    "analysis", "callback", "context", "error", "execution", "experiment", "logger",
    "progress_reporter", "registry", "result", "result_grid", "schedulers", "search", "stopper",
    "trainable", "tune", "tune_config", "tuner", "utils"
})
# Where each public name is defined, by module, imported on first use (see the docstring).
_DEFINED_IN = {
    "._controller._trial_config": ("CheckpointConfig", "FailureConfig"),
    ".trainable._resources": ("with_resources",),
    ".analysis.experiment_analysis": ("ExperimentAnalysis",),
    ".callback": ("Callback",),
    ".context": ("StopTrial", "TuneContext", "get_checkpoint", "get_context", "report"),
    ".error": ("TuneError",),
    ".registry": ("register_env", "register_trainable"),
    ".execution.placement_groups": ("PlacementGroupFactory",),
    ".progress_reporter": ("CLIReporter", "JupyterNotebookReporter", "ProgressReporter"),
    ".result_grid": ("Result", "ResultGrid"),
    ".schedulers.trial_scheduler": ("TrialScheduler",),
    ".search.sample": (
        "Domain", "choice", "grid_search", "lograndint", "loguniform", "qlograndint",
        "qloguniform", "qrandint", "qrandn", "quniform", "randint", "randn", "sample_from",
        "uniform",
    ),
    ".stopper.stopper": ("Stopper",),
    ".trainable.trainable": ("Trainable",),
    ".trainable.util": ("with_parameters",),
    ".tune": ("run", "run_experiments"),
    ".experiment.experiment": ("Experiment",),
    ".tune_config": ("RunConfig", "SyncConfig", "TuneConfig"),
    ".tuner": ("Tuner",),
    ".._shared._checkpoint": ("Checkpoint",),
}
_WHERE = {name: module for module, names in _DEFINED_IN.items() for name in names}


def __getattr__(name: str) -> _typing.Any:
    if name in _SUBMODULES:
        value: _typing.Any = _importlib.import_module(f"{__name__}.{name}")
    elif name in _WHERE:
        value = getattr(_importlib.import_module(_WHERE[name], __name__), name)
        # Public objects show their public module in reprs and tracebacks.
        if isinstance(value, type) and value.__module__.startswith(f"{__name__}."):
            value.__module__ = __name__
    else:
        from .._ray_names import missing

        raise missing(__name__, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)
