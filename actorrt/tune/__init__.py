"""actorrt.tune: Ray Tune's API on actorrt's actors and broker.

A Ray Tune script ports by changing ``from ray import tune`` to ``from actorrt import tune``.
Every trial is a trial-driver actor in a worker process holding its resources as one
placement group, so a trial and the workers it declares are reserved atomically, and an
undeclared request that can never be met is an error in the results, not a hang.

This package is a library layer: it uses only the public ``actorrt`` API (and the pure
``actorrt.resources`` layer, for GPU discovery). Submodules mirror Ray's:
``actorrt.tune.logger``, ``actorrt.tune.result``, ``actorrt.tune.schedulers``,
``actorrt.tune.search`` (and ``actorrt.tune.search.optuna``), ``actorrt.tune.stopper``,
``actorrt.tune.utils``.

A Ray name that actorrt does not have raises an ``AttributeError`` that says so and points
to docs/porting.md. Names are imported on first use (PEP 562): a trial's worker process
imports this package to run a trainable, and needs only the trial-side modules, not the
controller's. Every trial process pays for what this package imports, so it stays small.

Inside the package, modules form layers, bottom to top; a module imports only modules of
its own layer or of those below (never a higher one, not even for type checking: a lower
module that must call up names what it calls as a ``typing.Protocol`` or takes a callable),
and no two modules import each other:

1. Types, per-trial settings, search space: ``_errors``, ``_checkpoint``,
   ``_placement_group_factory``, ``_trial_config``, ``_sample``, ``_variants``,
   ``_storage``, ``_syncer``, ``_experiment_state``, ``_trainable``, ``_trial``, ``_reporters``,
   ``_stopper``, ``_workdir``, ``_trial_log``; public ``result``, ``stopper``.
2. Search algorithms and schedulers: ``_search``, ``_repeater``, ``_library_search`` and the
   searchers around optional libraries (``_optuna``, ``_hyperopt``, ``_bayesopt``, ``_bohb``,
   ``_nevergrad``, ``_zoopt``, ``_ax``); ``_schedulers``, ``_hyperband``, ``_pbt``, ``_pb2``,
   ``_resource_changing``; public ``search`` and ``schedulers`` with their submodules.
3. Experiment settings and what watches an experiment: ``_callbacks``, ``_loggers``,
   ``_config`` (``RunConfig`` and ``TuneConfig`` hold searchers, schedulers and callbacks,
   so they sit above them), ``_view``, ``_progress``; public ``logger``.
4. Running a trial: ``_resources``, ``_with_parameters``, ``_session``, ``_trial_actor``,
   ``_diagnose``, ``_gpu_wait``, ``_resize``, ``_bus``; public ``utils``.
5. The experiment's records: ``_recorder``, ``_recover``, ``_prepare``, ``_restore``,
   ``_analysis``, ``_result``, ``_saved_results``.
6. The controller, built up as subclasses that each call only down: ``_result_checks``,
   ``_controller_state``, ``_trial_launch``, ``_scheduler_actions``, ``_result_handling``,
   ``_controller``.
7. Entry points: ``_tuner``, ``_run``, and this module.
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
    from ._analysis import ExperimentAnalysis as ExperimentAnalysis
    from ._callbacks import Callback as Callback
    from ._config import RunConfig as RunConfig
    from ._config import SyncConfig as SyncConfig
    from ._config import TuneConfig as TuneConfig
    from ._errors import TuneError as TuneError
    from ._placement_group_factory import PlacementGroupFactory as PlacementGroupFactory
    from ._reporters import CLIReporter as CLIReporter
    from ._reporters import JupyterNotebookReporter as JupyterNotebookReporter
    from ._reporters import ProgressReporter as ProgressReporter
    from ._resources import with_resources as with_resources
    from ._result import Result as Result
    from ._result import ResultGrid as ResultGrid
    from ._run import run as run
    from ._session import StopTrial as StopTrial
    from ._session import TuneContext as TuneContext
    from ._session import get_checkpoint as get_checkpoint
    from ._session import get_context as get_context
    from ._session import report as report
    from ._stopper import Stopper as Stopper
    from ._trainable import Trainable as Trainable
    from ._trial_config import CheckpointConfig as CheckpointConfig
    from ._trial_config import FailureConfig as FailureConfig
    from ._tuner import Tuner as Tuner
    from ._with_parameters import with_parameters as with_parameters
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

__all__ = [
    "CLIReporter",
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "Domain",
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
    "report",
    "run",
    "sample_from",
    "uniform",
    "with_parameters",
    "with_resources",
]

_SUBMODULES = frozenset({"logger", "result", "stopper", "utils", "schedulers", "search"})
_WHERE = {
    "Callback": "._callbacks",
    "Checkpoint": ".._shared._checkpoint",
    "CheckpointConfig": "._trial_config",
    "FailureConfig": "._trial_config",
    "RunConfig": "._config",
    "TuneConfig": "._config",
    "PlacementGroupFactory": "._placement_group_factory",
    "with_resources": "._resources",
    "Result": "._result",
    "ResultGrid": "._result",
    "Domain": ".search.sample",
    "choice": ".search.sample",
    "grid_search": ".search.sample",
    "lograndint": ".search.sample",
    "loguniform": ".search.sample",
    "qloguniform": ".search.sample",
    "qrandint": ".search.sample",
    "qrandn": ".search.sample",
    "quniform": ".search.sample",
    "randint": ".search.sample",
    "randn": ".search.sample",
    "sample_from": ".search.sample",
    "uniform": ".search.sample",
    "TrialScheduler": ".schedulers.trial_scheduler",
    "StopTrial": "._session",
    "TuneContext": "._session",
    "get_checkpoint": "._session",
    "get_context": "._session",
    "report": "._session",
    "Trainable": "._trainable",
    "Tuner": "._tuner",
    "CLIReporter": "._reporters",
    "JupyterNotebookReporter": "._reporters",
    "ProgressReporter": "._reporters",
    "ExperimentAnalysis": "._analysis",
    "TuneError": "._errors",
    "run": "._run",
    "with_parameters": "._with_parameters",
    "qlograndint": ".search.sample",
    "Stopper": "._stopper",
    "SyncConfig": "._config",
}


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
