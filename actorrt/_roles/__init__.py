"""A runtime's role: what a runtime does besides running its own actors.

:class:`~actorrt._runtime._root.Runtime` is the composition root. When it is entered it builds one
role and delegates to it every call whose answer depends on where the runtime runs (the
:class:`~actorrt._roles._role.Role` interface: spawn an actor that needs resources or a
process, reserve / await / remove a placement group, look a name up, read resource views):

- :class:`~actorrt._roles._driver.DriverRole`, the user's program: it owns the scheduler (the
  resource broker), the worker pool and the status socket, and serves its workers;
- :class:`~actorrt._roles._worker.WorkerRole`, a worker process: it reaches the owning runtime
  over its connection for all of the above.

Cluster mode adds two more behind the same interface: a head role (the broker of every node)
and a node role (a node's worker pool, reaching the head), so ``Runtime`` itself need not
change.
"""
