"""The runtime and the API around it: the composition root (``_root``), ``actorrt.run`` and
the resource views (``_api``), the sync facade, ``wait``, tasks, the actor pool, shared
objects, ``get_actor`` and ``ray.init``'s arguments."""
