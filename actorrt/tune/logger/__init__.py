"""Logger callbacks (Ray's ``ray.tune.logger``).

Every trial's results are written as ``result.json`` (JSON lines) and ``progress.csv`` by
Tune itself, which ``JsonLoggerCallback`` and ``CSVLoggerCallback`` stand for (passing them
writes nothing twice); ``TBXLoggerCallback`` adds TensorBoard event files, and is on by
default when ``tensorboardX`` is installed.
"""

from .csv import CSVLoggerCallback as CSVLoggerCallback
from .json import JsonLoggerCallback as JsonLoggerCallback
from .logger import LoggerCallback as LoggerCallback
from .tensorboardx import TBXLoggerCallback as TBXLoggerCallback

# Shown under the module users import them from.
for _cls in (CSVLoggerCallback, JsonLoggerCallback, LoggerCallback, TBXLoggerCallback):
    _cls.__module__ = __name__
del _cls

__all__ = ["CSVLoggerCallback", "JsonLoggerCallback", "LoggerCallback", "TBXLoggerCallback"]
