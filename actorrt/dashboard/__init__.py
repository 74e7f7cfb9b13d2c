"""actorrt's dashboard: a read-only web view of a runtime, its sweeps and its waits.

``actorrt.init(include_dashboard=True)``, ``Runtime(dashboard=True)`` or ``actorrt dashboard
FOLDER`` start it (docs/dashboard.md). The server (``_server``, aiohttp on the runtime's own
loop) answers GET requests only: the page (``static/``) and a JSON API built from the
runtime's status snapshot (``_state``) and from the sweeps registered here (``_sources``).
A sweep library registers a :class:`SweepSource` while it runs; nothing here imports one.
"""

from ._config import DashboardConfig as DashboardConfig
from ._config import dashboard_config as dashboard_config
from ._sources import SweepSource as SweepSource
from ._sources import register_sweep as register_sweep
from ._sources import serving as serving
from ._sources import unregister_sweep as unregister_sweep

__all__ = [
    "DashboardConfig",
    "SweepSource",
    "dashboard_config",
    "register_sweep",
    "serving",
    "unregister_sweep",
]
