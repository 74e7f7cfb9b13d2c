"""The controller side of Tune: what runs an experiment in the driver, never in a trial.

The experiment folder and its journal, restore, the controller built up in layers, progress
output. A trial's worker process imports nothing from here (``tests/project/test_layering.py``).
"""
