"""Experiment-tracking integrations at Ray's ``ray.air.integrations`` paths.

``mlflow`` (``MLflowLoggerCallback``, ``setup_mlflow``) and ``wandb``
(``WandbLoggerCallback``, ``setup_wandb``) drive the real libraries; each module needs its
extra (``pip install 'actorrt[mlflow]'``, ``'actorrt[wandb]'``) and says so when it is
missing. ``comet`` is not provided: its callback says so when built.
"""
