"""The libraries' shared tier: what ``actorrt.tune`` and ``actorrt.train`` both use.

A private package between the actor core and the two libraries. Its modules import only
the standard library and the public ``actorrt`` API, never ``actorrt.tune`` or
``actorrt.train``; both libraries may import it, and so they need not import each other.
It holds the one ``Checkpoint`` class (``actorrt.tune.Checkpoint is
actorrt.train.Checkpoint``, as in Ray), the hook through which a trainer finds the sweep
trial it runs in (``_trial_hook``), local storage paths, and the table of Ray names
actorrt lacks (which the top-level package uses too).

This file imports nothing, so that importing one module here loads only that module.
"""
