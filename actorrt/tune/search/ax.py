"""Ray's ``ray.tune.search.ax`` (``AxSearch``): not available in actorrt.

Importing this module raises ImportError: ax-platform installs (with botorch, gpytorch,
IPython and about twenty more packages) but is not wrapped yet. See docs/tune.md.
"""

raise ImportError(
    "AxSearch is not available in actorrt: the ax-platform library (with botorch, gpytorch "
    "and IPython) is not wrapped yet. Use actorrt.tune.search.hyperopt.HyperOptSearch, "
    ".optuna.OptunaSearch, .bayesopt.BayesOptSearch, .nevergrad.NevergradSearch, "
    ".bohb.TuneBOHB or .zoopt.ZOOptSearch"
)
