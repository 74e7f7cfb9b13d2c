"""The wire codec: Python values to msgpack and back.

Plain data (``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list``, ``dict``) is
native msgpack. Everything else is a msgpack extension type (codes in :data:`EXT_CODES` and in
``docs/wire.md``):

* **tuples** are arrays whose first element is an empty ``EXT_TUPLE`` marker. The packer's
  ``default`` hook turns ``(a, b)`` into ``[<marker>, a, b]`` and the same packer packs that list
  in the same pass, so a tuple costs one Python call to encode (no nested packer, no copy).
  Messages that hold a tuple are flagged (:data:`FLAG_TUPLES`) and only they are decoded with a
  ``list_hook``; tuple-free messages decode at native msgpack speed.
* **numpy arrays** (exact ``numpy.ndarray`` of a plain dtype) travel as dtype, shape and raw
  bytes. Arrays of at least ``buffer_threshold`` bytes go *out of band*: the frame carries them
  after the msgpack body (:data:`FLAG_BUFFERS`), so they are never copied into the packer. A
  C- or Fortran-contiguous array's buffer is its own memory (a Fortran one keeps its order); a
  strided one is copied once into C order. Whether a writable buffer is copied before it is
  written is the connection's choice (an ask's are not, a tell's and a reply's are:
  :func:`actorrt._wire._buffers.snapshot`, ``docs/wire.md``). On decode, out-of-band arrays
  are views on the received frame when the caller owns it (``owned=True``: zero copy);
  decoded arrays are writable and keep the frame's memory alive while they live. numpy is
  imported only when an array is decoded.
* **exceptions** are pickled (cloudpickle) together with their type name, message and formatted
  traceback. The receiver re-raises the same type when it can be unpickled; otherwise (pickling
  failed at the sender, the class is missing, its constructor refuses the pickled arguments, or
  pickle is not allowed on this codec) it builds a :class:`RemoteError` from the name and the
  message. Either way the remote traceback text is attached as a note (``__notes__``) and as a
  ``remote_traceback`` attribute where the exception accepts attributes.
* **typed messages** (the classes of :mod:`actorrt._wire._messages`) at the top level are
  arrays ``[tag, *fields]`` flagged :data:`FLAG_MESSAGE`, decoded back into their class;
  their fields are values like any other.
* **actor references** go through the ``encode_ref``/``decode_ref`` hooks given to the codec,
  for instances of ``ref_types``; the hooks also apply to refs nested inside pickled objects
  (pickle's persistent ids).
* **anything else** (instances of user classes, functions, classes, sets, big ints, ``int`` and
  ``str`` subclasses, ...) is pickled with cloudpickle. Large buffers inside the pickle (numpy
  arrays held by an object) use pickle protocol 5 and travel out of band as above.

``bytes``, ``bytearray`` and ``memoryview`` are packed natively by msgpack's C packer as ``bin``
(there is no hook to intercept them), so they arrive as ``bytes``, copied once into the packer and
once out of the frame. Wrap a large raw buffer in a numpy array (``np.frombuffer(b, np.uint8)``)
to send it without copies.

Something that cannot be encoded raises :class:`TypeError` at the sender, naming the value's type
and the ``context`` the caller gave (``"argument 2 of Worker.train"``).

Security: a pickle can run code when it is loaded. A codec built with ``allow_pickle=False``
refuses pickled extension types (:class:`PickleRefusedError`) and rebuilds exceptions only as
:class:`RemoteError`. The transport decodes nothing before the peer has authenticated.

A :class:`Codec` is not thread-safe and not reentrant across threads: use one per event loop
(the transport makes one per connection).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Any, Final

import msgpack
from msgpack import ExtType

from .._errors import PickleRefusedError as PickleRefusedError
from .._errors import RemoteError as RemoteError
from ._messages import from_wire, tag_of
from ._records import EXT_CODES as EXT_CODES
from ._records import EXT_TUPLE, Records, Unsendable, type_name

__all__ = [
    "EXT_CODES",
    "FLAG_BUFFERS",
    "FLAG_MESSAGE",
    "FLAG_TOP_TUPLE",
    "FLAG_TUPLES",
    "Codec",
    "PickleRefusedError",
    "RemoteError",
]

logger = logging.getLogger("actorrt")

#: Flag bits of the payload's flag byte. The low four bits are free for the transport's kind.
FLAG_TUPLES: Final = 0x10  # the body holds marked arrays: decode with the list hook
FLAG_BUFFERS: Final = 0x20  # out-of-band buffers follow the body
FLAG_TOP_TUPLE: Final = 0x40  # the value is a tuple, sent as a plain array
FLAG_MESSAGE: Final = 0x80  # the value is a typed message: an array [tag, *fields]
FLAG_MASK: Final = FLAG_TUPLES | FLAG_BUFFERS | FLAG_TOP_TUPLE | FLAG_MESSAGE

#: Buffers at least this large travel out of band.
DEFAULT_BUFFER_THRESHOLD: Final = 64 * 1024
# After packing a body this large the packer is replaced: msgpack never shrinks its buffer.
_PACKER_SHRINK_ABOVE: Final = 4 * 1024 * 1024

_TUPLE_MARK: Final = ExtType(EXT_TUPLE, b"")
_U64 = struct.Struct("!Q")


class _TupleMarker:
    """What the ``EXT_TUPLE`` marker decodes to; the list hook turns marked lists into tuples."""

    __slots__ = ()


_MARKER: Final = _TupleMarker()


class Codec(Records):
    """Encodes Python values as msgpack payloads and decodes them.

    Args:
        ref_types: classes whose instances are actor references, encoded with ``encode_ref``.
        encode_ref: turns a reference into bytes (called for instances of ``ref_types``).
        decode_ref: turns those bytes back into a reference on the receiving side.
        allow_pickle: whether pickled extension types may be decoded. Only a codec that talks
            to an authenticated peer may allow it. Encoding always may pickle.
        buffer_threshold: numpy arrays and pickle buffers of at least this many bytes travel out
            of band.

    The low-level pair :meth:`pack` / :meth:`unpack` is what the transport uses; :meth:`encode`
    / :meth:`decode` wrap it into one self-describing ``bytes`` payload.
    """

    # __slots__ for speed: the attributes are read on every encode and decode (the records'
    # own are in Records.__slots__).
    __slots__ = ("_ext_hook", "_flags", "_packer", "_packing")

    def __init__(
        self,
        *,
        ref_types: tuple[type, ...] = (),
        encode_ref: Callable[[Any], bytes] | None = None,
        decode_ref: Callable[[bytes], Any] | None = None,
        allow_pickle: bool = True,
        buffer_threshold: int = DEFAULT_BUFFER_THRESHOLD,
    ) -> None:
        if ref_types and (encode_ref is None or decode_ref is None):
            raise ValueError("ref_types needs both encode_ref and decode_ref")
        self._ref_types = tuple(ref_types)
        self._encode_ref = encode_ref
        self._decode_ref = decode_ref
        self.allow_pickle = allow_pickle
        self._buffer_threshold = buffer_threshold
        self._packer = self._new_packer()
        self._packing = False
        self._flags = 0
        self._buffers_out = []
        self._nbytes_out = 0
        self._buffers_in = None
        self._owned = False
        self._ext_hook = _make_ext_hook(self._decode_ext)

    def _new_packer(self) -> Any:
        return msgpack.Packer(
            default=self._default, strict_types=True, use_bin_type=True, buf_size=64 * 1024
        )

    # -- encoding -------------------------------------------------------------------------

    def pack(self, obj: object, context: object = "value") -> tuple[int, bytes, list[Any]]:
        """Encode ``obj`` into its parts.

        Args:
            obj: the value to encode.
            context: what the value is, for the error message (``"argument 2 of W.train"``);
                any object whose ``str()`` says so, taken only when the value cannot be sent.

        Returns:
            ``(flags, head, buffers)``: the flag bits (:data:`FLAG_TUPLES`,
            :data:`FLAG_BUFFERS`); the head (the msgpack body, preceded by its 8-byte length
            when there are buffers); the out-of-band buffers to send after it, in order (an
            empty list when there are none; do not mutate it).

        Raises:
            TypeError: the value (or something inside it) cannot be sent; the message names
                its type and ``context``.
        """
        if self._packing:
            # A value's __reduce__ encoding another value with this codec: use a fresh one.
            return Codec(
                ref_types=self._ref_types,
                encode_ref=self._encode_ref,
                decode_ref=self._decode_ref,
                buffer_threshold=self._buffer_threshold,
            ).pack(obj, context)
        cls = type(obj)
        if cls is tuple:
            # The top level needs no marker: a flag says "tuple", and the body is a plain array.
            top: object = list(obj)  # type: ignore[call-overload]  # cls is tuple
            self._flags = FLAG_TOP_TUPLE
        elif (tag := tag_of(cls)) is not None:
            # A typed message (actorrt._wire._messages): its tag, then its fields, flagged.
            top = [tag, *obj]  # type: ignore[misc]
            self._flags = FLAG_MESSAGE
        else:
            top = obj
            self._flags = 0
        try:
            body = self._packer.pack(top)
        except Exception as exc:
            raise self._pack_failed(obj, exc, context) from exc
        if self._buffers_out or len(body) > _PACKER_SHRINK_ABOVE:
            return self._finish_large(body)
        return self._flags, body, _NO_BUFFERS

    def pack_tagged(self, items: Any, context: object = "value") -> tuple[int, bytes, list[Any]]:
        """:meth:`pack` for a typed message already in its wire form, the list
        ``[tag, *fields]`` (``tag`` from :func:`~actorrt._wire._messages.tag_of`): no message
        object to build, no type to look up."""
        if self._packing:  # reentered (see pack): a fresh codec
            return Codec(
                ref_types=self._ref_types,
                encode_ref=self._encode_ref,
                decode_ref=self._decode_ref,
                buffer_threshold=self._buffer_threshold,
            ).pack_tagged(items, context)
        self._flags = FLAG_MESSAGE
        try:
            body = self._packer.pack(items)
        except Exception as exc:
            raise self._pack_failed(items, exc, context) from exc
        if self._buffers_out or len(body) > _PACKER_SHRINK_ABOVE:
            return self._finish_large(body)
        return FLAG_MESSAGE | self._flags, body, _NO_BUFFERS

    def _finish_large(self, body: bytes) -> tuple[int, bytes, list[Any]]:
        if len(body) > _PACKER_SHRINK_ABOVE:
            self._packer = self._new_packer()  # let go of its grown buffer
        buffers = self._buffers_out
        if not buffers:
            return self._flags, body, _NO_BUFFERS
        self._buffers_out, self._nbytes_out = [], 0
        return self._flags | FLAG_BUFFERS, _U64.pack(len(body)) + body, buffers

    def encode(self, obj: object, context: object = "value") -> bytes:
        """Encode ``obj`` as one self-describing payload (flag byte, then :meth:`pack`'s parts).

        Args:
            obj: the value to encode.
            context: what the value is, for the error message.

        Returns:
            The payload; :meth:`decode` reads it back.

        Raises:
            TypeError: the value cannot be sent (see :meth:`pack`).
        """
        flags, head, buffers = self.pack(obj, context)
        return b"".join([bytes((flags,)), head, *buffers])

    def _pack_failed(self, obj: object, exc: Exception, context: object) -> Exception:
        """The error to raise when packing failed: a TypeError naming the culprit and context."""
        self._buffers_out, self._nbytes_out = [], 0
        if isinstance(exc, Unsendable):
            culprit, cause = exc.args
        elif isinstance(exc, (TypeError, ValueError, OverflowError, UnicodeError)):
            # msgpack's own: recursion limit (deep or cyclic data), unencodable strings.
            culprit, cause = obj, exc
        else:
            return exc  # raised by a hook (encode_ref, __reduce__): let it through
        return TypeError(
            f"cannot send {context}: a value of type {type_name(culprit)} cannot be "
            f"serialized ({cause})"
        )

    def _default(self, obj: Any) -> Any:
        """msgpack's hook for every value that is not plain data, called while packing."""
        if type(obj) is tuple:
            self._flags |= FLAG_TUPLES
            return [_TUPLE_MARK, *obj]
        # What follows may run user code (__reduce__, the ref hook) that uses this codec.
        self._packing = True
        try:
            return self._encode_other(obj)
        finally:
            self._packing = False

    # -- decoding -------------------------------------------------------------------------

    def unpack(self, flags: int, data: Any, owned: bool = False) -> Any:
        """Decode what :meth:`pack` produced.

        Args:
            flags: the flag byte sent with the payload (bits outside :data:`FLAG_MASK` are
                ignored).
            data: a bytes-like object holding the head and the buffers.
            owned: whether ``data`` belongs to this payload alone, so that decoded arrays may
                be views on it (zero copy). When false they are copied out of it.

        Returns:
            The decoded value.

        Raises:
            PickleRefusedError: a pickled value arrived and ``allow_pickle`` is false.
            ValueError: the payload is malformed (a malformed message:
                :class:`~actorrt._wire._messages.MalformedMessage`).
        """
        if flags & FLAG_BUFFERS:
            return self._unpack_with_buffers(flags, data, owned)
        if flags & FLAG_TUPLES:
            value = _unpackb(
                data, ext_hook=self._ext_hook, list_hook=_list_hook, strict_map_key=False
            )
        else:
            value = _unpackb(data, ext_hook=self._ext_hook, strict_map_key=False)
        if flags & FLAG_MESSAGE:
            return from_wire(value)
        if flags & FLAG_TOP_TUPLE:
            return tuple(value)
        return value

    def _unpack_with_buffers(self, flags: int, data: Any, owned: bool) -> Any:
        view = memoryview(data)
        (body_len,) = _U64.unpack_from(view)
        outer = self._buffers_in, self._owned
        self._buffers_in, self._owned = view[8 + body_len :], owned
        try:
            return self.unpack(flags & ~FLAG_BUFFERS, view[8 : 8 + body_len])
        finally:
            self._buffers_in, self._owned = outer

    def decode(self, payload: Any, *, owned: bool = False) -> Any:
        """Decode a payload made by :meth:`encode`.

        Args:
            payload: a bytes-like object.
            owned: see :meth:`unpack`.

        Returns:
            The decoded value.
        """
        view = memoryview(payload)
        return self.unpack(view[0], view[1:], owned=owned)

_NO_BUFFERS: Final[list[Any]] = []
_unpackb = msgpack.unpackb


def _make_ext_hook(slow: Callable[[int, bytes], Any]) -> Callable[[int, bytes], Any]:
    """The ext hook, with the tuple marker (the hot case) answered before any method call."""

    def ext_hook(code: int, data: bytes, _tuple: int = EXT_TUPLE, _marker: Any = _MARKER) -> Any:
        if code == _tuple:
            return _marker
        return slow(code, data)

    return ext_hook


def _list_hook(items: list[Any]) -> Any:
    if items and items[0] is _MARKER:
        del items[0]
        return tuple(items)
    return items
