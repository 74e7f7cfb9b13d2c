"""Tune's framework callbacks (Ray's ``ray.tune.integration``): ``xgboost`` and ``lightgbm``.

Each needs its library (``pip install 'actorrt[xgboost]'``, ``'actorrt[lightgbm]'``). Ray's
other integrations here (Keras, ``pytorch_lightning``, ``ray_train``) are not provided:
Lightning training is ``actorrt.train.lightning``; see docs/porting.md.
"""
