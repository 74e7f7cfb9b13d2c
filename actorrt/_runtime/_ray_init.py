"""Ray's ``ray.init`` arguments, as ``actorrt.init`` takes them.

Each Ray argument is one of: used (``address`` of an actorrt cluster's head, ``num_cpus``,
``num_gpus``, ``resources``, ``ignore_reinit_error``, ``logging_level``,
``runtime_env={"env_vars": ...}``, ``_memory``, ``include_dashboard``, ``dashboard_host``,
``dashboard_port``), refused with a clear error where going on
would mislead (a Ray Client ``ray://`` address), or
ignored with one warning line naming all the ignored ones (they have no meaning for a
runtime without an object store). An argument that is neither Ray's
nor actorrt's is a ``TypeError``, as any unknown keyword argument is.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from typing import Any

from .._cluster._files import running_head

__all__ = ["RUNTIME_ARGS", "ray_init_args"]

RUNTIME_ARGS = frozenset(
    {"num_cpus", "num_gpus", "memory", "resources", "shutdown_timeout", "worker_env"}
)

# Ray's init arguments that mean nothing here, each with the reason the warning gives.
IGNORED = {
    "local_mode": "trials and actors still run in worker processes",
    "configure_logging": "actorrt never configures logging; it logs to 'actorrt'",
    "logging_format": "actorrt never configures logging",
    "logging_config": "actorrt never configures logging",
    "log_to_driver": "worker output always reaches the driver's terminal",
    "namespace": "actor names are per runtime",
    "job_config": "there are no Ray jobs",
    "object_store_memory": "there is no object store",
    "labels": "there are no node labels",
    "enable_resource_isolation": "there is no resource isolation",
    "system_reserved_cpu": "there is no resource isolation",
    "system_reserved_memory": "there is no resource isolation",
    "storage": "experiments choose their storage_path",
    "_system_config": "Ray's internal settings do not apply",
    "_temp_dir": "Ray's internal settings do not apply",
    "_node_ip_address": "a node's address is given to `actorrt start --node-ip-address`",
    "_plasma_directory": "there is no object store",
    "_enable_object_reconstruction": "there is no object store",
    "_metrics_export_port": "there are no metrics",
    "_redis_password": "there is no Redis",
    "_tracing_startup_hook": "there is no tracing",
    "_redis_max_memory": "there is no Redis",
    "_driver_object_store_memory": "there is no object store",
    "_node_name": "nodes are named by `actorrt start`",
}

_LOCAL_ADDRESSES = (None, "local")
ADDRESS_VARIABLE = "ACTORRT_ADDRESS"


def default_address() -> str | None:
    """Where ``init()`` with no address goes, as ``ray.init()`` does: ``$ACTORRT_ADDRESS``,
    else the cluster whose head was started on this machine, else nowhere (this machine
    alone)."""
    given = os.environ.get(ADDRESS_VARIABLE, "").strip()
    if given:
        return given
    if os.environ.get("RAY_ADDRESS", "").strip():
        warnings.warn(
            f"actorrt.init(): RAY_ADDRESS={os.environ['RAY_ADDRESS']!r} is set, but it names a "
            f"Ray cluster and is not read here: set {ADDRESS_VARIABLE} (or pass address=) to "
            "join an actorrt cluster's head (docs/cluster.md)",
            stacklevel=4,
        )
    head = running_head()
    if head is not None:
        logging.getLogger("actorrt").warning(
            "actorrt.init(): connecting to the cluster whose head runs on this machine at %s "
            "(pass address='local' for this machine alone)", head,
        )
    return head


def ray_init_args(address: Any, kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``actorrt.init``'s arguments split: the runtime's keyword arguments, and whether
    an already running runtime is fine (``ignore_reinit_error``)."""
    if isinstance(address, str) and address.startswith("ray://"):
        raise ValueError(
            f"actorrt.init(address={address!r}): Ray Client addresses do not apply; give "
            "the actorrt cluster head's 'HOST:PORT' (`actorrt start --head` prints it), "
            "'auto', or leave address unset for this machine alone (docs/cluster.md)"
        )
    runtime = {k: v for k, v in kwargs.items() if k in RUNTIME_ARGS}
    if address is None:
        address = default_address()
    if address not in _LOCAL_ADDRESSES:
        runtime["address"] = address
    rest = {k: v for k, v in kwargs.items() if k not in RUNTIME_ARGS}
    if "_memory" in rest:  # Ray's hidden spelling of the memory to schedule with
        if "memory" in runtime:
            raise TypeError("actorrt.init(): give memory or _memory, not both")
        runtime["memory"] = rest.pop("_memory")
    reinit_ok = bool(rest.pop("ignore_reinit_error", False))
    level = rest.pop("logging_level", None)
    if level is not None:
        logging.getLogger("actorrt").setLevel(level)
    dashboard = _dashboard(rest)
    if dashboard is not None:
        runtime["dashboard"] = dashboard
    runtime_env = rest.pop("runtime_env", None)
    ignored = [f"{k} ({IGNORED[k]})" for k in rest if k in IGNORED]
    if runtime_env is not None:
        runtime["worker_env"] = _worker_env(runtime_env, runtime.get("worker_env"), ignored)
    unknown = sorted(k for k in rest if k not in IGNORED)
    if unknown:
        raise TypeError(
            f"actorrt.init() got unknown arguments {unknown}; it takes Ray's init "
            f"arguments and {sorted(RUNTIME_ARGS)}"
        )
    if ignored:
        warnings.warn(
            "actorrt.init() ignores these Ray arguments: " + "; ".join(ignored),
            stacklevel=3,
        )
    return runtime, reinit_ok


def _dashboard(rest: dict[str, Any]) -> dict[str, Any] | None:
    """Ray's dashboard arguments as ``Runtime(dashboard=...)``: started with
    ``include_dashboard=True``, or when ``dashboard_host``/``dashboard_port`` are given and
    ``include_dashboard`` is not ``False`` (Ray's default ``None`` starts it wherever its
    packages are installed; here it is asked for)."""
    include = rest.pop("include_dashboard", None)
    host = rest.pop("dashboard_host", None)
    port = rest.pop("dashboard_port", None)
    if include is not None and not isinstance(include, bool):
        raise TypeError(f"actorrt.init(include_dashboard=...) must be a bool, got {include!r}")
    if include is False or (include is None and host is None and port is None):
        return None
    config: dict[str, Any] = {}
    if host is not None:
        config["host"] = host
    if port is not None:
        config["port"] = port
    return config


def _worker_env(
    runtime_env: Any, given: Mapping[str, str] | None, ignored: list[str]
) -> dict[str, str]:
    if not isinstance(runtime_env, Mapping):
        raise ValueError(f"runtime_env must be a dict, got {runtime_env!r}")
    env = dict(given or {})
    env_vars = runtime_env.get("env_vars") or {}
    if not isinstance(env_vars, Mapping):
        raise ValueError(f"runtime_env['env_vars'] must be a dict, got {env_vars!r}")
    env.update({str(k): str(v) for k, v in env_vars.items()})
    others = sorted(k for k in runtime_env if k != "env_vars")
    if others:
        ignored.append(
            f"runtime_env {others} (workers share this machine's environment; only "
            "env_vars is used)"
        )
    return env
