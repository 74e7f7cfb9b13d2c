"""How trials are executed (Ray's ``ray.tune.execution``): only ``placement_groups`` is public.

Ray's ``tune_controller``, ``experiment_state`` and the other execution internals have no
counterpart here under those names: the controller is ``actorrt.tune._controller``.
"""
