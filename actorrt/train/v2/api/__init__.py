"""Ray's ``ray.train.v2.api``: V2's public API, as ``actorrt.train`` has it."""
