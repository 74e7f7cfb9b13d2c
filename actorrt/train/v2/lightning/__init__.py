"""Ray's ``ray.train.v2.lightning``: ``actorrt.train.lightning``'s names."""

from ...lightning import RayDDPStrategy as RayDDPStrategy
from ...lightning import RayDeepSpeedStrategy as RayDeepSpeedStrategy
from ...lightning import RayFSDPStrategy as RayFSDPStrategy
from ...lightning import RayLightningEnvironment as RayLightningEnvironment
from ...lightning import RayTrainReportCallback as RayTrainReportCallback
from ...lightning import prepare_trainer as prepare_trainer

__all__ = [
    "RayDDPStrategy", "RayDeepSpeedStrategy", "RayFSDPStrategy", "RayLightningEnvironment",
    "RayTrainReportCallback", "prepare_trainer",
]
