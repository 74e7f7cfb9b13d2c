"""Tune's framework callbacks (Ray's ``ray.tune.integration``): ``xgboost``, ``lightgbm``
and ``pytorch_lightning``.

Each needs its library (``pip install 'actorrt[xgboost]'``, ``'actorrt[lightgbm]'``,
``'actorrt[lightning]'``). Ray's Keras callbacks are not provided; see docs/porting.md.
"""
