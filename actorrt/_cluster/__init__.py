"""Cluster mode: one broker across machines (docs/cluster.md).

- the **head** (``_head``): the cluster's broker and its registry of nodes and drivers,
  reached over TCP with TLS; it notices a node or a driver that has gone silent;
- a **node agent** (``_agent``) on every machine that offers resources: it joins the head
  with what its machine has, and starts worker processes there for the drivers that were
  granted resources on it;
- a **driver** (``_link``): a user's program whose runtime was given ``address=``; its
  resource requests go to the head's broker, its actors run in workers on the nodes of
  their grants, and its calls go straight to those workers, never through the head.

Every connection proves that it knows the cluster's token (``_files``) before anything is
decoded, and is encrypted with TLS.
"""
