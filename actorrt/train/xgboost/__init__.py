"""actorrt.train.xgboost: XGBoost on a gang of training workers (Ray Train V2's names).

``XGBoostTrainer`` joins its workers to one XGBoost collective (a ``RabitTracker`` on rank
0's node) before the training function runs; in the function, ``xgboost.train`` with
``RayTrainReportCallback()`` trains one model over every worker's shard and reports each
round. Needs ``pip install 'actorrt[xgboost]'``; without xgboost, importing this module
raises an ``ImportError`` saying so.
"""

from ._xgboost_utils import RayTrainReportCallback as RayTrainReportCallback
from .config import XGBoostConfig as XGBoostConfig
from .xgboost_trainer import XGBoostTrainer as XGBoostTrainer

for _cls in (RayTrainReportCallback, XGBoostConfig, XGBoostTrainer):
    _cls.__module__ = __name__
del _cls

__all__ = ["RayTrainReportCallback", "XGBoostConfig", "XGBoostTrainer"]
