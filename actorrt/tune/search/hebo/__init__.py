"""Ray's ``ray.tune.search.hebo`` (``HEBOSearch``): not available in actorrt.

Importing this module raises ImportError: HEBO pins numpy 1.24 and scipy 1.12, which would
downgrade what actorrt and torch run on, so no extra installs it. See docs/tune.md.
"""

raise ImportError(
    "HEBOSearch is not available in actorrt: the HEBO library pins numpy 1.24 and scipy 1.12, "
    "which would downgrade what actorrt and torch run on, so no actorrt extra installs it. Use "
    "actorrt.tune.search.hyperopt.HyperOptSearch, .optuna.OptunaSearch, "
    ".bayesopt.BayesOptSearch, .ax.AxSearch, .nevergrad.NevergradSearch, .bohb.TuneBOHB or "
    ".zoopt.ZOOptSearch; see docs/porting.md for what a Ray script needs to change"
)
