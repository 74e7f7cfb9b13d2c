"""Experiment-tracking integrations at Ray's ``ray.air.integrations`` paths.

``mlflow`` (``MLflowLoggerCallback``, ``setup_mlflow``), ``wandb``
(``WandbLoggerCallback``, ``setup_wandb``) and ``comet`` (``CometLoggerCallback``) drive
the real libraries; each needs its extra (``pip install 'actorrt[mlflow]'``,
``'actorrt[wandb]'``, ``'actorrt[comet]'``) and says so when it is missing (``comet``
when its callback is built, as Ray's).
"""
