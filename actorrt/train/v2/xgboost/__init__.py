"""Ray's ``ray.train.v2.xgboost``: ``actorrt.train.xgboost``'s names."""

from ...xgboost import RayTrainReportCallback as RayTrainReportCallback
from ...xgboost import XGBoostConfig as XGBoostConfig
from ...xgboost import XGBoostTrainer as XGBoostTrainer

__all__ = ["RayTrainReportCallback", "XGBoostConfig", "XGBoostTrainer"]
