"""The public surface is exactly what __all__ says, and shows its public module."""

import actorrt

EXPECTED = {
    "ActorClass", "ActorDiedError", "ActorError", "ActorNotFoundError", "ActorOptions",
    "ActorRef", "ActorrtError", "AskHandle", "AskTimeoutError", "BundleRef",
    "HeadLostError", "DriverDroppedError", "InfeasibleResourceError", "PlacementGroup",
    "PlacementInfo",
    "available_resources", "cluster_resources",
    "get_gpu_ids", "pending_requests", "placement_group",
    "MailboxFullError", "MethodRef", "NoRuntimeError", "RemoteError", "ResourceDeadlockError",
    "DeadlockError", "DeathReason", "WireError", "ConnectionLostError", "AuthenticationError",
    "ProtocolVersionError", "FrameTooLargeError", "PickleRefusedError", "NvmlUnavailableError",
    "MalformedMessageError",
    "ResourceError", "Runtime", "RuntimeAlreadyRunningError", "RuntimeClosedError",
    "RuntimeContext", "RuntimeStateError", "actor", "get", "get_actor", "get_context",
    "init", "is_initialized", "run", "shutdown", "spawn", "task", "TaskFunction", "wait",
    "TaskStream", "put", "ObjectRef",
}


def test_all_is_exactly_the_public_surface() -> None:
    assert set(actorrt.__all__) == EXPECTED
    public = {name for name in dir(actorrt) if not name.startswith("_")}
    submodules = {"testing", "resources", "tune", "train", "examples", "air", "util", "dashboard"}
    assert public - submodules - {"annotations"} == EXPECTED


def test_public_objects_name_their_public_module() -> None:
    assert repr(actorrt.ActorDiedError) == "<class 'actorrt.ActorDiedError'>"
    for name in actorrt.__all__:
        assert getattr(actorrt, name).__module__ == "actorrt", name


def test_error_tree_subclasses_the_matching_standard_exceptions() -> None:
    assert issubclass(actorrt.AskTimeoutError, TimeoutError)
    assert issubclass(actorrt.AskTimeoutError, actorrt.ActorError)
    assert issubclass(actorrt.ActorDiedError, actorrt.ActorError)
    assert issubclass(actorrt.ActorError, actorrt.ActorrtError)
    assert issubclass(actorrt.NoRuntimeError, RuntimeError)
    assert issubclass(actorrt.InfeasibleResourceError, ValueError)
    assert issubclass(actorrt.ResourceDeadlockError, actorrt.ResourceError)
    assert issubclass(actorrt.ActorNotFoundError, ValueError)


def test_every_exception_of_the_package_is_in_one_tree() -> None:
    for name in ("WireError", "NvmlUnavailableError", "ResourceError", "ActorError",
                 "DeadlockError", "RuntimeStateError", "RemoteError"):
        assert issubclass(getattr(actorrt, name), actorrt.ActorrtError), name
    assert issubclass(actorrt.ConnectionLostError, ConnectionError)
    assert issubclass(actorrt.ProtocolVersionError, actorrt.WireError)
    assert issubclass(actorrt.NvmlUnavailableError, RuntimeError)
    assert actorrt.DeathReason("crashed") == "crashed"
    died = actorrt.ActorDiedError("x", reason="killed")
    assert died.reason is actorrt.DeathReason.KILLED
