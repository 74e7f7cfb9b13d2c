"""Logger callbacks (Ray's ``ray.tune.logger``).

Every trial's results are written as ``result.json`` (JSON lines) and ``progress.csv`` by
Tune itself; ``TBXLoggerCallback`` adds TensorBoard event files, and is on by default when
``tensorboardX`` is installed.
"""

from ._loggers import LoggerCallback as LoggerCallback
from ._loggers import TBXLoggerCallback as TBXLoggerCallback

# Shown under the module users import them from.
LoggerCallback.__module__ = TBXLoggerCallback.__module__ = __name__

__all__ = ["LoggerCallback", "TBXLoggerCallback"]
