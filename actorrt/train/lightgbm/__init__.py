"""actorrt.train.lightgbm: LightGBM on a gang of training workers (Ray Train V2's names).

``LightGBMTrainer`` finds every worker's address and a free port before the training
function runs; in the function, ``lightgbm.train`` with ``get_network_params()`` merged into
its params and ``RayTrainReportCallback()`` trains one model over every worker's shard and
reports each round. Needs ``pip install 'actorrt[lightgbm]'``; without lightgbm, importing
this module raises an ``ImportError`` saying so.
"""

from ._lightgbm_utils import RayTrainReportCallback as RayTrainReportCallback
from .config import LightGBMConfig as LightGBMConfig
from .config import get_network_params as get_network_params
from .lightgbm_trainer import LightGBMTrainer as LightGBMTrainer

for _cls in (RayTrainReportCallback, LightGBMConfig, LightGBMTrainer):
    _cls.__module__ = __name__
del _cls

__all__ = ["LightGBMConfig", "LightGBMTrainer", "RayTrainReportCallback", "get_network_params"]
