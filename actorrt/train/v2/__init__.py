"""Ray's ``ray.train.v2``: Ray Train V2's own module paths, for programs and tests that
import from them. ``actorrt.train`` is V2's API; these modules are the same objects under
V2's paths (``ray.train.v2.api.config``, ``ray.train.v2.torch``, ...)."""
