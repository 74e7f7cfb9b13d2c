"""The wire codec: every kind of value round-trips, and what cannot be sent fails at the sender."""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import types
from collections import OrderedDict, namedtuple
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorrt._wire._codec import FLAG_BUFFERS, FLAG_TUPLES, Codec, PickleRefusedError, RemoteError

pytestmark = pytest.mark.timeout(30)

Point = namedtuple("Point", "x y")


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (a tuple is not a list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def roundtrip(value: Any, codec: Codec | None = None, **decode: Any) -> Any:
    codec = codec or Codec()
    return codec.decode(codec.encode(value), **decode)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text()
    | st.binary()
)
keys = st.text() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
plain = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(keys, inner, max_size=5)
    ),
    max_leaves=25,
)


@given(plain)
@settings(max_examples=300, deadline=None)
def test_plain_data_round_trips_with_its_types(value: Any) -> None:
    assert same(roundtrip(value), value)


@pytest.mark.parametrize(
    "value",
    [
        (),
        ((),),
        ("m", (1, "x"), {}),
        [(1, 2), [3, (4, [5])]],
        {"k": (1, (2, (3,)))},
        {(1, 2): "tuple key", 3: "int key"},
        [[(), []]],
    ],
)
def test_tuples_survive_as_tuples(value: Any) -> None:
    assert same(roundtrip(value), value)


def test_a_message_without_tuples_is_not_flagged() -> None:
    flags, _, _ = Codec().pack(["m", [1, "x"], {}])
    assert not flags & FLAG_TUPLES
    flags, _, _ = Codec().pack(("m", (1, "x"), {}))
    assert flags & FLAG_TUPLES


@pytest.mark.parametrize(
    "value",
    [2**100, -(2**80), {1, 2}, frozenset({"a"}), 1 + 2j, Point(1, 2), OrderedDict(a=1), range(3)],
)
def test_other_builtins_round_trip_through_pickle(value: Any) -> None:
    out = roundtrip(value)
    assert out == value and type(out) is type(value)


def test_bytes_like_values_arrive_as_bytes() -> None:
    assert roundtrip(b"abc") == b"abc"
    assert roundtrip(bytearray(b"abc")) == b"abc"
    assert roundtrip(memoryview(b"abc")) == b"abc"


@dataclasses.dataclass
class Holder:
    name: str
    array: Any = None


def test_user_classes_functions_and_lambdas_round_trip() -> None:
    assert roundtrip(Holder("x")) == Holder("x")
    assert roundtrip(same) is same  # importable: pickled by reference
    assert roundtrip(lambda x: x + 1)(1) == 2  # not importable: by value
    local = types.new_class("Local", (), {}, lambda ns: ns.update(f=lambda self: 42))
    assert roundtrip(local)().f() == 42


# -- numpy ---------------------------------------------------------------------------------


def read_only(array: Any) -> Any:
    array.flags.writeable = False
    return array


@pytest.mark.parametrize(
    "array",
    [
        np.arange(10, dtype=np.int64),
        np.zeros((0, 3)),
        np.array(3.5),
        np.arange(12, dtype=np.float32).reshape(3, 4).T,  # not C-contiguous
        np.array([True, False]),
        np.array(["ab", "c"]),
        np.arange(6, dtype=">i4").reshape(2, 3),
        np.array(["2026-11-30"], dtype="datetime64[D]"),
        np.random.default_rng(0).random((300, 300)),  # 720 KB: out of band
        # out of band too: not C-contiguous, big-endian, a dtype with no buffer format
        np.arange(90_000, dtype=np.float32).reshape(300, 300).T,
        np.arange(200_000, dtype=">i4"),
        np.arange(100_000).astype("datetime64[s]"),
        read_only(np.arange(100_000).astype("datetime64[s]")),
    ],
)
def test_arrays_round_trip_intact(array: Any) -> None:
    out = roundtrip(array)
    assert type(out) is np.ndarray
    assert out.dtype == array.dtype and out.shape == array.shape
    np.testing.assert_array_equal(out, array)


def test_arrays_of_objects_and_records_go_through_pickle() -> None:
    objects = np.array([{"a": 1}, None], dtype=object)
    assert roundtrip(objects).tolist() == objects.tolist()
    records = np.zeros(3, dtype=[("a", "i4"), ("b", "f8")])
    np.testing.assert_array_equal(roundtrip(records), records)


def test_a_large_read_only_array_is_sent_without_copy() -> None:
    array = np.arange(1 << 16, dtype=np.float64)
    array.flags.writeable = False
    flags, _, buffers = Codec().pack(array)
    assert flags & FLAG_BUFFERS
    assert len(buffers) == 1 and np.shares_memory(np.frombuffer(buffers[0], np.float64), array)


def test_large_arrays_decode_as_writable_views_on_an_owned_frame() -> None:
    codec = Codec()
    array = np.arange(1 << 16, dtype=np.int32)
    payload = bytearray(codec.encode(array))
    out = codec.decode(payload, owned=True)
    assert np.shares_memory(out, np.frombuffer(payload, np.uint8))
    out[0] = 7  # writable
    copied = codec.decode(payload)
    assert not np.shares_memory(copied, np.frombuffer(payload, np.uint8))


def test_arrays_inside_pickled_objects_travel_out_of_band() -> None:
    codec = Codec()
    holder = Holder("w", np.arange(1 << 16, dtype=np.float64))
    flags, _, buffers = codec.pack(holder)
    assert flags & FLAG_BUFFERS and buffers
    out = roundtrip(holder, codec)
    np.testing.assert_array_equal(out.array, holder.array)


def test_64_mib_of_bytes_and_array_round_trip() -> None:
    data = np.random.default_rng(1).integers(0, 255, 64 << 20, dtype=np.uint8)
    blob = data.tobytes()
    out = roundtrip((blob, data))
    assert out[0] == blob
    np.testing.assert_array_equal(out[1], data)


# -- exceptions ----------------------------------------------------------------------------


class CustomError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message, code)
        self.code = code


class NeedsKeyword(Exception):
    """Pickles, but cannot be rebuilt: its constructor refuses the pickled arguments."""

    def __init__(self, *, reason: str) -> None:
        super().__init__(f"because {reason}")


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_an_exception_is_rebuilt_as_its_own_type_with_the_remote_traceback() -> None:
    out = roundtrip(raised(CustomError("boom", 7)))
    assert type(out) is CustomError and out.args == ("boom", 7) and out.code == 7
    assert "raise exc" in out.remote_traceback
    assert any("Remote traceback" in note and "CustomError: ('boom', 7)" in note
               for note in out.__notes__)  # fmt: skip


def test_chained_and_builtin_exceptions_round_trip() -> None:
    try:
        try:
            {}["missing"]
        except KeyError as inner:
            raise ValueError("outer") from inner
    except ValueError as exc:
        out = roundtrip(exc)
    assert type(out) is ValueError and str(out) == "outer"
    assert "KeyError: 'missing'" in out.remote_traceback  # the cause is in the text


def test_an_exception_that_cannot_be_rebuilt_arrives_as_remote_error() -> None:
    out = roundtrip(raised(NeedsKeyword(reason="tests")))
    assert type(out) is RemoteError
    assert out.type_name.endswith("NeedsKeyword") and out.remote_message == "because tests"
    assert "NeedsKeyword" in str(out) and "raise exc" in out.remote_traceback


def test_an_unpicklable_exception_arrives_as_remote_error() -> None:
    exc = raised(RuntimeError("holds a lock", threading.Lock()))
    out = roundtrip(exc)
    assert type(out) is RemoteError and out.type_name == "RuntimeError"
    assert "holds a lock" in out.remote_message and out.remote_traceback


def test_an_exception_whose_class_is_missing_here_arrives_as_remote_error() -> None:
    module = types.ModuleType("actorrt_vanishing_module")
    exec("class GoneError(Exception):\n    pass\n", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        payload = Codec().encode(raised(module.GoneError("bye")))
    finally:
        del sys.modules[module.__name__]
    out = Codec().decode(payload)
    assert type(out) is RemoteError and out.type_name == "actorrt_vanishing_module.GoneError"
    assert out.remote_message == "bye"


def test_a_codec_without_pickle_refuses_pickles_and_rebuilds_no_exception() -> None:
    payload = Codec().encode(Holder("x"))
    with pytest.raises(PickleRefusedError):
        Codec(allow_pickle=False).decode(payload)
    out = Codec(allow_pickle=False).decode(Codec().encode(raised(KeyError("k"))))
    assert type(out) is RemoteError and out.type_name == "KeyError"


# -- refs ----------------------------------------------------------------------------------


class FakeRef:
    """A stand-in for ActorRef: the codec only sees it through the hooks."""

    def __init__(self, actor_id: str) -> None:
        self.actor_id = actor_id

    def __reduce__(self) -> Any:
        raise AssertionError("a ref must go through the ref hooks, never pickle")


def ref_codec(registry: dict[str, FakeRef]) -> Codec:
    def decode(data: bytes) -> FakeRef:
        return registry.setdefault(data.decode(), FakeRef(data.decode()))

    return Codec(
        ref_types=(FakeRef,), encode_ref=lambda ref: ref.actor_id.encode(), decode_ref=decode
    )


def test_refs_go_through_the_hooks_also_inside_pickled_objects() -> None:
    registry: dict[str, FakeRef] = {}
    codec = ref_codec(registry)
    ref = FakeRef("a1")
    out = roundtrip({"refs": [ref, (ref,)], "held": Holder("h", ref)}, codec)
    local = registry["a1"]
    assert out["refs"][0] is local and out["refs"][1][0] is local
    assert out["held"].array is local


def test_ref_types_need_both_hooks() -> None:
    with pytest.raises(ValueError, match="encode_ref and decode_ref"):
        Codec(ref_types=(FakeRef,), encode_ref=lambda ref: b"")


# -- what cannot be sent -------------------------------------------------------------------


def generator() -> Any:
    yield 1


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (threading.Lock(), "_thread.lock"),
        (generator(), "generator"),
        ([1, {"deep": (2, threading.Lock())}], "_thread.lock"),
        (Holder("h", threading.Lock()), "Holder"),
    ],
)
def test_unsendable_values_fail_at_the_sender_naming_type_and_context(
    value: Any, type_name: str
) -> None:
    with pytest.raises(TypeError, match="argument 2 of Worker.train") as info:
        Codec().encode(value, context="argument 2 of Worker.train")
    assert type_name in str(info.value)


def test_cyclic_data_fails_at_the_sender() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(TypeError, match="cannot send the reply"):
        Codec().encode(cycle, context="the reply")


def test_the_codec_is_usable_after_a_failed_encode() -> None:
    codec = Codec()
    with pytest.raises(TypeError):
        codec.encode([np.zeros(1 << 16), threading.Lock()])
    assert same(roundtrip(("ok", (1,)), codec), ("ok", (1,)))


def test_encoding_the_hot_message_takes_no_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = Codec()

    def no_pickle(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickled")

    monkeypatch.setattr(Codec, "_dumps", no_pickle)
    for _ in range(1000):
        assert same(roundtrip(("m", (1, "x"), {}), codec), ("m", (1, "x"), {}))
