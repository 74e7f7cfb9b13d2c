"""Clear errors for Ray Train arguments actorrt does not take, at the call that passes them.

A Ray script that passes one of these gets a ``TypeError`` (or, where Ray Train V2 itself
rejects the argument, the same ``DeprecationWarning`` exception V2 raises) naming the
argument, what to do instead, and docs/porting.md, rather than a bare "unexpected keyword
argument" or an ``AttributeError`` later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PORTING = "see docs/porting.md, 'Ray Train arguments actorrt does not take'"

# Ray Train V2 raises DeprecationWarning for these; so does actorrt, with V2's advice.
V2_REMOVED = {
    "resume_from_checkpoint": (
        "`resume_from_checkpoint` is deprecated in Ray Train V2 and not supported: load "
        "the checkpoint yourself in the training function (pass its path in "
        "train_loop_config), or rerun with the same RunConfig(name, storage_path) to "
        "resume a run from its latest checkpoint"
    ),
    "metadata": (
        "the trainer's `metadata` argument is deprecated in Ray Train V2 and not "
        "supported: pass the values in train_loop_config, or store them in the "
        "checkpoint folder"
    ),
    "restore": (
        "`Trainer.restore` is deprecated in Ray Train V2 and not supported: build the "
        "trainer again with the same RunConfig(name, storage_path) and call fit(); it "
        "resumes from that run's latest checkpoint"
    ),
}

# Arguments of Ray's API that actorrt does not implement, and what to do instead.
NOT_HERE = {
    "dataset_config": "Ray Data's DataConfig is out of scope; datasets= takes in-memory data",
    "storage_filesystem": "runs are written to the local file system only",
    "sync_config": "runs are written to the local file system only",
    "worker_runtime_env": "there are no runtime environments; set environment "
    "variables with actorrt.init(worker_env=...)",
    "accelerator_type": "nodes declare no accelerator type; start the nodes that have the "
    "accelerator with a custom resource (`actorrt start --resources '{\"A100\": 8}'`) and ask "
    "for it in resources_per_worker",
    "topology": "there is no TPU training (use_tpu=True is refused), so no TPU slice "
    "topology",
    "label_selector": "nodes carry no labels; start the nodes you mean with a custom "
    "resource (`actorrt start --resources '{\"pool_a\": 8}'`) and ask for it in "
    "resources_per_worker",
    "checkpoint_dir_name": "checkpoint folders are named checkpoint_<index>, so that "
    "every rank's files of one report merge into one folder",
    "checkpoint_upload_mode": "checkpoints are copied into the run folder before "
    "report() returns",
    "delete_local_checkpoint_after_upload": "checkpoints are copied into the run folder "
    "before report() returns; the source folder is left as it is",
}


def reject(call: str, given: Mapping[str, Any]) -> None:
    """Raise for the first Ray-only keyword argument in ``given`` passed to ``call``.

    ``None`` counts as not given (Ray's defaults). Unknown names get the usual
    ``TypeError``, with the porting note.

    Raises:
        DeprecationWarning: an argument Ray Train V2 itself rejects.
        TypeError: any other argument this API does not take.
    """
    for name, value in given.items():
        if name in V2_REMOVED:
            if value is not None:
                raise DeprecationWarning(f"{call}: {V2_REMOVED[name]} ({PORTING})")
        elif name in NOT_HERE:
            if value is not None:
                raise TypeError(
                    f"{call}: {name}={value!r} is not supported: {NOT_HERE[name]} ({PORTING})"
                )
        else:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")

