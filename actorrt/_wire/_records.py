"""The codec's extension records beyond tuples: actor refs, numpy arrays, exceptions and
pickles, and the out-of-band buffers that large arrays travel in.

:class:`Records` is the base of :class:`~actorrt._wire._codec.Codec` (which adds the packer,
tuples, typed messages and the flag byte); ``docs/wire.md`` has the record formats. Encoding
runs inside msgpack's ``default`` hook, decoding inside its ``ext_hook``.
"""

from __future__ import annotations

import io
import logging
import pickle
import struct
import sys
import traceback
from collections.abc import Callable
from typing import Any, Final

import msgpack
from msgpack import ExtType

from .._errors import PickleRefusedError, RemoteError
from ._pickling import Pickler

__all__ = ["EXT_CODES", "Records", "Unsendable", "type_name"]

logger = logging.getLogger("actorrt")

#: Extension type codes. Code 0 and negative codes are unused (msgpack reserves -1..-128).
EXT_TUPLE: Final = 1
EXT_NDARRAY: Final = 2
EXT_EXCEPTION: Final = 3
EXT_REF: Final = 4
EXT_PICKLE: Final = 5
EXT_CODES: Final = {
    "tuple": EXT_TUPLE,
    "ndarray": EXT_NDARRAY,
    "exception": EXT_EXCEPTION,
    "ref": EXT_REF,
    "pickle": EXT_PICKLE,
}

_SPAN = struct.Struct("!QQ")  # offset, length of an out-of-band buffer
_ND_HEAD = struct.Struct("!BBB")  # layout bits (below), ndim, len(dtype.str)
ND_OUT_OF_BAND: Final = 0x01  # the bytes are an out-of-band buffer, not inline
ND_FORTRAN: Final = 0x02  # the bytes are in Fortran (column-major) order
_PICKLE_HEAD = struct.Struct("!I")  # number of out-of-band buffers


class Unsendable(Exception):
    """Raised inside the packer's hook: (culprit, cause); ``pack`` adds the context."""


class _Pickler(Pickler):
    """cloudpickle with actor refs as persistent ids, so they use the codec's ref hooks
    (and code objects that keep their file names)."""

    def __init__(self, file: io.BytesIO, codec: Records, buffer_callback: Any) -> None:
        super().__init__(file, protocol=5, buffer_callback=buffer_callback)
        self._codec = codec

    def persistent_id(self, obj: object) -> bytes | None:
        codec = self._codec
        if codec._ref_types and isinstance(obj, codec._ref_types):
            return codec._encode_ref(obj)  # type: ignore[misc]
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, codec: Records, buffers: list[memoryview]) -> None:
        super().__init__(file, buffers=buffers)
        self._codec = codec

    def persistent_load(self, pid: Any) -> Any:
        decode_ref = self._codec._decode_ref
        if decode_ref is None:
            raise pickle.UnpicklingError("a pickled actor ref arrived but this codec has no refs")
        return decode_ref(bytes(pid))


class Records:
    """Encoding and decoding the extension records (a base of the codec)."""

    # __slots__ for speed: read on every record. The codec's own are in Codec.__slots__.
    __slots__ = (
        "_buffer_threshold",
        "_buffers_in",
        "_buffers_out",
        "_decode_ref",
        "_encode_ref",
        "_nbytes_out",
        "_owned",
        "_ref_types",
        "allow_pickle",
    )

    _buffer_threshold: int
    _buffers_in: memoryview | None
    _buffers_out: list[Any]
    _decode_ref: Callable[[bytes], Any] | None
    _encode_ref: Callable[[Any], bytes] | None
    _nbytes_out: int
    _owned: bool
    _ref_types: tuple[type, ...]
    allow_pickle: bool

    def _encode_other(self, obj: Any) -> Any:
        if self._ref_types and isinstance(obj, self._ref_types):
            return ExtType(EXT_REF, self._encode_ref(obj))  # type: ignore[misc]
        # numpy may be half imported by another thread: then it has no ndarray yet, and
        # no value here can be one.
        ndarray = getattr(sys.modules.get("numpy"), "ndarray", None)
        if ndarray is not None and type(obj) is ndarray and not _needs_pickle(obj):
            return self._encode_ndarray(obj)
        if isinstance(obj, BaseException):
            return ExtType(EXT_EXCEPTION, self._encode_exception(obj))
        try:
            return ExtType(EXT_PICKLE, self._dumps(obj, out_of_band=True))
        except Exception as exc:
            raise Unsendable(obj, exc) from exc

    def _add_buffer(self, buf: Any, nbytes: int) -> int:
        """Queue an out-of-band buffer; return its offset in the buffer region."""
        offset = self._nbytes_out
        self._buffers_out.append(buf)
        self._nbytes_out = offset + nbytes
        return offset

    def _encode_ndarray(self, arr: Any) -> ExtType:
        flags = arr.flags
        # A Fortran-ordered array goes in its own order (no copy to C order); the receiver
        # rebuilds it so.
        order = ND_FORTRAN if flags.f_contiguous and not flags.c_contiguous else 0
        dtype = arr.dtype.str.encode("ascii")
        shape = arr.shape
        layout = dtype + struct.pack(f"!{len(shape)}q", *shape)
        nbytes = arr.nbytes
        if nbytes < self._buffer_threshold:
            head = _ND_HEAD.pack(order, len(shape), len(dtype))
            return ExtType(EXT_NDARRAY, head + layout + arr.tobytes(order="F" if order else "C"))
        if order or flags.c_contiguous:
            # Its own memory, no copy (as bytes: a buffer of some dtypes, such as
            # datetime64, cannot be exported as it is). A writable one is copied later only
            # where the message is not an ask (Codec.snapshot).
            data: Any = memoryview(arr.ravel(order="A").view("u1"))
        else:
            # Not contiguous: one copy, made by numpy (its allocation takes huge pages: 100
            # MB in a third of the time of tobytes()'s bytes); nothing else can change it.
            copy = arr.copy(order="C")
            copy.flags.writeable = False
            data = memoryview(copy.reshape(-1).view("u1"))
        offset = self._add_buffer(data, nbytes)
        head = _ND_HEAD.pack(order | ND_OUT_OF_BAND, len(shape), len(dtype))
        return ExtType(EXT_NDARRAY, head + layout + _SPAN.pack(offset, nbytes))

    def _encode_exception(self, exc: BaseException) -> bytes:
        name = type_name(exc)
        try:
            message = str(exc)
        except Exception:
            message = f"<str() of {name} failed>"
        tb = "".join(traceback.format_exception(exc))
        try:
            pickled: bytes | None = self._dumps(exc, out_of_band=False)
        except Exception as err:
            logger.debug("exception %s is not picklable (%s); sending it as text", name, err)
            pickled = None
        packed: bytes = msgpack.packb([name, message, tb, pickled], use_bin_type=True)
        return packed

    def _dumps(self, obj: object, *, out_of_band: bool) -> bytes:
        spans: list[tuple[int, int]] = []
        threshold = self._buffer_threshold

        def keep(pb: pickle.PickleBuffer) -> bool:
            try:
                raw = pb.raw()
            except BufferError:  # not contiguous: pickle copies it in band
                return True
            nbytes = raw.nbytes
            if nbytes < threshold:
                return True
            spans.append((self._add_buffer(raw, nbytes), nbytes))  # its memory (snapshot())
            return False

        out = io.BytesIO()
        _Pickler(out, self, keep if out_of_band else None).dump(obj)
        head = _PICKLE_HEAD.pack(len(spans)) + b"".join(_SPAN.pack(o, n) for o, n in spans)
        return head + out.getvalue()

    def _decode_ext(self, code: int, data: bytes) -> Any:
        if code == EXT_REF:
            if self._decode_ref is None:
                raise ValueError("an actor ref arrived but this codec has no decode_ref hook")
            return self._decode_ref(data)
        if code == EXT_NDARRAY:
            return self._decode_ndarray(data)
        if code == EXT_EXCEPTION:
            return self._decode_exception(data)
        if code == EXT_PICKLE:
            if not self.allow_pickle:
                raise PickleRefusedError("refusing to unpickle a value from an untrusted peer")
            return self._loads(data)
        raise ValueError(f"unknown msgpack extension type {code}")

    def _buffer(self, offset: int, nbytes: int) -> Any:
        region = self._buffers_in
        if region is None or offset + nbytes > len(region):
            raise ValueError("out-of-band buffer outside the payload")
        view = region[offset : offset + nbytes]
        return view if self._owned else bytearray(view)

    def _decode_ndarray(self, data: bytes) -> Any:
        import numpy as np

        layout, ndim, dlen = _ND_HEAD.unpack_from(data)
        if layout & ~(ND_OUT_OF_BAND | ND_FORTRAN):
            raise ValueError(f"malformed numpy array record: unknown layout bits {layout:#x}")
        pos = _ND_HEAD.size
        dtype = np.dtype(data[pos : pos + dlen].decode("ascii"))
        pos += dlen
        shape = struct.unpack_from(f"!{ndim}q", data, pos)
        pos += 8 * ndim
        if layout & ND_OUT_OF_BAND:
            offset, nbytes = _SPAN.unpack_from(data, pos)
            buf: Any = self._buffer(offset, nbytes)
        else:
            buf = bytearray(memoryview(data)[pos:])  # writable, like out-of-band arrays
        flat = np.frombuffer(buf, dtype=dtype)
        return flat.reshape(shape, order="F") if layout & ND_FORTRAN else flat.reshape(shape)

    def _loads(self, data: bytes) -> Any:
        (count,) = _PICKLE_HEAD.unpack_from(data)
        pos = _PICKLE_HEAD.size
        buffers = []
        for _ in range(count):
            offset, nbytes = _SPAN.unpack_from(data, pos)
            pos += _SPAN.size
            buffers.append(memoryview(self._buffer(offset, nbytes)))
        return _Unpickler(io.BytesIO(memoryview(data)[pos:]), self, buffers).load()

    def _decode_exception(self, data: bytes) -> BaseException:
        name, message, tb, pickled = msgpack.unpackb(data, strict_map_key=False)
        exc: BaseException | None = None
        if pickled is not None and self.allow_pickle:
            try:
                loaded = self._loads(pickled)
            except Exception as err:
                logger.debug("cannot rebuild remote %s (%s); raising RemoteError", name, err)
            else:
                if isinstance(loaded, BaseException):
                    exc = loaded
        if exc is None:
            exc = RemoteError(name, message, tb)
        else:
            try:
                exc.remote_traceback = tb  # type: ignore[attr-defined]
            except (AttributeError, TypeError):
                pass  # __slots__ or a read-only attribute: the note below still carries it
        exc.add_note(f"\nRemote traceback:\n{tb.rstrip()}")
        return exc


def _needs_pickle(arr: Any) -> bool:
    """Arrays whose dtype has no flat byte layout (objects, records) go through pickle."""
    dtype = arr.dtype
    return bool(dtype.hasobject or dtype.fields is not None or dtype.kind == "V")


def type_name(obj: object) -> str:
    """``module.QualName`` of ``obj``'s type (just the name for builtins)."""
    cls = type(obj)
    module = cls.__module__
    qualname = cls.__qualname__
    return qualname if module == "builtins" else f"{module}.{qualname}"
