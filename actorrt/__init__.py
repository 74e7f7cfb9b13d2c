"""actorrt: a lightweight asyncio actor runtime with a gang-scheduling resource broker.

Layers, bottom to top. A module imports only its own layer and the layers below it
(TYPE_CHECKING imports included); tests/project/test_layering.py checks this and that the import
graph has no cycle. docs/architecture.md draws the layers and the path of a call.

0. errors: ``_errors``: every exception of the package, in one tree, and ``DeathReason``.
   owned: ``_owned``: the one check that a folder is this user's alone (runtime discovery,
   Tune's experiment folders); imports nothing of the package, and the libraries use it.
1. wire: ``_wire``: frames, connections, the codec, authentication, transports and the
   typed, versioned messages. resources: ``actorrt.resources``: the pure broker (specs,
   nodes, GPUs, placement groups, deadlock detection), driven by events; probing the
   machine is one module of it. Neither imports the other.
2. core: ``_core``: mailboxes, the actor lifecycle and its supervision, cells, refs,
   handles, options, context, placement-group handles; it reaches the running runtime
   through a protocol (``_core._current``), never by importing it, and never imports the
   wire.
3. processes: ``_processes``: the scheduler that owns the broker, the worker pool and
   worker main, process actors, proxies, the router and the dispatch of messages.
4. control: ``_control``: status snapshots, the status socket, runtime discovery.
   4.5. dashboard: ``actorrt.dashboard``: the web view's server, its JSON views and page,
   and the registry where a sweep library shows its sweeps.
5. api: ``_runtime`` (``_runtime._root``, the composition root: it picks its role,
   ``_roles``, and wires the layers; ``_api``, ``_sync``, ``_wait``, ``_tasks`` with
   ``_task_lanes`` and ``_task_streams``, ``_actor_pool``, ``_objects``, ``_lookup``,
   ``_ray_init``), ``_ray_names``, ``_sigterm`` and this module.
6. shared: ``_shared``: what the libraries share (one ``Checkpoint``, the enclosing-trial
   hook), built only on the names exported here.
7. libraries: ``actorrt.tune``, ``actorrt.train``: built only on the names exported here
   (and ``_shared``); neither imports the other. Their modules are at Ray's paths, in
   layers of their own that their package docstrings name.
   util: ``actorrt.util``: Ray's ``ray.util`` names (``ActorPool``), built on ``_actor_pool``
   (api layer) and the names exported here.
8. applications: ``actorrt.air``, ``actorrt.tune.integration`` (callbacks over both
   libraries), ``actorrt.examples``, ``actorrt.testing``, the CLI (``_cli``).
"""

from . import _moved
from ._core._actor import ActorClass as ActorClass
from ._core._actor import actor as actor
from ._core._actor import spawn as spawn
from ._core._context import PlacementInfo as PlacementInfo
from ._core._context import RuntimeContext as RuntimeContext
from ._core._context import get_context as get_context
from ._core._handle import AskHandle as AskHandle
from ._core._options import ActorOptions as ActorOptions
from ._core._placement_group import BundleRef as BundleRef
from ._core._placement_group import PlacementGroup as PlacementGroup
from ._core._placement_group import placement_group as placement_group
from ._core._ref import ActorRef as ActorRef
from ._core._ref import MethodRef as MethodRef
from ._errors import ActorDiedError as ActorDiedError
from ._errors import ActorError as ActorError
from ._errors import ActorNotFoundError as ActorNotFoundError
from ._errors import ActorrtError as ActorrtError
from ._errors import AskTimeoutError as AskTimeoutError
from ._errors import AuthenticationError as AuthenticationError
from ._errors import ConnectionLostError as ConnectionLostError
from ._errors import DeadlockError as DeadlockError
from ._errors import DeathReason as DeathReason
from ._errors import DriverDroppedError as DriverDroppedError
from ._errors import FrameTooLargeError as FrameTooLargeError
from ._errors import HeadLostError as HeadLostError
from ._errors import InfeasibleResourceError as InfeasibleResourceError
from ._errors import MailboxFullError as MailboxFullError
from ._errors import MalformedMessageError as MalformedMessageError
from ._errors import NoRuntimeError as NoRuntimeError
from ._errors import NvmlUnavailableError as NvmlUnavailableError
from ._errors import PickleRefusedError as PickleRefusedError
from ._errors import ProtocolVersionError as ProtocolVersionError
from ._errors import RemoteError as RemoteError
from ._errors import ResourceDeadlockError as ResourceDeadlockError
from ._errors import ResourceError as ResourceError
from ._errors import RuntimeAlreadyRunningError as RuntimeAlreadyRunningError
from ._errors import RuntimeClosedError as RuntimeClosedError
from ._errors import RuntimeStateError as RuntimeStateError
from ._errors import WireError as WireError
from ._runtime._api import available_resources as available_resources
from ._runtime._api import cluster_resources as cluster_resources
from ._runtime._api import get_gpu_ids as get_gpu_ids
from ._runtime._api import pending_requests as pending_requests
from ._runtime._api import run as run
from ._runtime._lookup import get_actor as get_actor
from ._runtime._objects import ObjectRef as ObjectRef
from ._runtime._objects import put as put
from ._runtime._root import Runtime as Runtime
from ._runtime._sync import get as get
from ._runtime._sync import init as init
from ._runtime._sync import is_initialized as is_initialized
from ._runtime._sync import shutdown as shutdown
from ._runtime._task_streams import TaskStream as TaskStream
from ._runtime._tasks import TaskFunction as TaskFunction
from ._runtime._tasks import task as task
from ._runtime._wait import wait as wait

__version__ = "0.1.0.dev0"

__all__ = [
    "ActorClass",
    "ActorDiedError",
    "ActorError",
    "ActorNotFoundError",
    "ActorOptions",
    "ActorRef",
    "ActorrtError",
    "AskHandle",
    "AskTimeoutError",
    "AuthenticationError",
    "BundleRef",
    "ConnectionLostError",
    "DeadlockError",
    "DeathReason",
    "DriverDroppedError",
    "FrameTooLargeError",
    "HeadLostError",
    "InfeasibleResourceError",
    "MailboxFullError",
    "MalformedMessageError",
    "MethodRef",
    "NoRuntimeError",
    "NvmlUnavailableError",
    "ObjectRef",
    "PickleRefusedError",
    "PlacementGroup",
    "PlacementInfo",
    "ProtocolVersionError",
    "RemoteError",
    "ResourceDeadlockError",
    "ResourceError",
    "Runtime",
    "RuntimeAlreadyRunningError",
    "RuntimeClosedError",
    "RuntimeContext",
    "RuntimeStateError",
    "TaskFunction",
    "TaskStream",
    "WireError",
    "actor",
    "available_resources",
    "cluster_resources",
    "get",
    "get_actor",
    "get_context",
    "get_gpu_ids",
    "init",
    "is_initialized",
    "pending_requests",
    "placement_group",
    "put",
    "run",
    "shutdown",
    "spawn",
    "task",
    "wait",
]

# Public objects show their public module in tracebacks and reprs.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("actorrt._"):
        try:
            _obj.__module__ = "actorrt"
        except (AttributeError, TypeError):
            pass
del _name, _obj

# `import actorrt.tune.integration` (a Ray module actorrt lacks) says so, naming porting.md.
from ._ray_names import install_module_finder as _install_module_finder  # noqa: E402

_install_module_finder()
_moved.install()  # what an earlier release pickled names modules that have moved since


def __getattr__(name: str) -> object:
    # `import actorrt as ray; ray.tune.Tuner` works as `ray.tune` does: imported on use.
    if name in ("tune", "train", "air", "util"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    # A Ray name actorrt does not have: say so, and where the differences are listed.
    from ._ray_names import missing

    raise missing(__name__, name)
