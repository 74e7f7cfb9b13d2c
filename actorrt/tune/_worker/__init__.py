"""The trial side of Tune: what a trial's worker process imports to run a trainable.

The trial-driver actor, the trial's folder and log, what a trainable reserves. Nothing here
imports the controller side (``actorrt.tune._controller``); ``tests/project/test_layering.py``
checks it.
"""
