"""Ray's ``ray.tune.search.hebo`` (``HEBOSearch``): not available in actorrt.

Importing this module raises ImportError: actorrt does not wrap HEBO (see docs/tune.md,
"Search algorithms"). Use HyperOptSearch, OptunaSearch, BayesOptSearch, NevergradSearch or
TuneBOHB instead.
"""

raise ImportError(
    "HEBOSearch is not available in actorrt: it does not wrap the HEBO library (not installed "
    "by any actorrt extra). Use one of actorrt.tune.search.hyperopt.HyperOptSearch, "
    ".optuna.OptunaSearch, .bayesopt.BayesOptSearch, .nevergrad.NevergradSearch, "
    ".bohb.TuneBOHB"
)
