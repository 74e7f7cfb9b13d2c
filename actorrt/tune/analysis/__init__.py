"""What the legacy ``tune.run`` returns (Ray's ``ray.tune.analysis``)."""

from .experiment_analysis import ExperimentAnalysis as ExperimentAnalysis

__all__ = ["ExperimentAnalysis"]
