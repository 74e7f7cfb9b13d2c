"""Resource specs: parsing user dicts into exact, immutable :class:`Resources` values.

Names: ``CPU``, ``GPU``, ``memory`` (bytes) and custom names (any other non-empty string).
Tune-style dicts may also spell ``cpu`` and ``gpu``; giving both spellings of one name with
different values is a ``ValueError``.

Values: finite, non-negative real numbers (not ``bool``). Inside they are fixed-point integers
in units of 1/10000 (:data:`UNIT` per whole), so sums and differences never drift: ten grants
of 0.1 then ten releases give back exactly 1. A value is put on that grid as Ray puts it:
cut toward zero (``1/3`` is 0.3333, ``2/3`` is 0.6666, ``0.1 + 0.2`` is 0.3). A value whose
shortest decimal form has at most four decimals is kept exactly (``0.29`` is 0.29; Ray's
float multiplication can make it 0.2899). A non-zero amount below 1/10000 is refused, as Ray
refuses it. Zero-valued keys are dropped. A GPU amount above 1 must be whole (a fraction is
placed on one device and never split across devices). ``memory`` is a number of bytes and
must be whole.

Every bad value is reported at the call that made it, naming the key, the value and what is
allowed: ``TypeError`` for a non-number (``bool`` included), ``ValueError`` for a negative,
NaN or infinite amount, or one finer than 1/10000.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from fractions import Fraction

__all__ = [
    "CPU",
    "GPU",
    "MEMORY",
    "UNIT",
    "Resources",
    "format_amount",
    "parse_resources",
    "resources_from_options",
]

CPU = "CPU"
GPU = "GPU"
MEMORY = "memory"
UNIT = 10_000
"""Fixed-point scale: one whole CPU (GPU, byte, custom unit) is ``UNIT`` internal units."""

_ALIASES = {"cpu": CPU, "gpu": GPU}
_ALLOWED = "a finite, non-negative number (int or float, not bool)"


def to_units(key: str, value: object, *, label: str | None = None) -> int:
    """Convert one user amount to fixed-point units, validating it.

    Args:
        key: the canonical resource name (``CPU``, ``GPU``, ``memory`` or custom).
        value: the amount as given by the user.
        label: how to name the input in an error (defaults to ``resource 'key'``).

    Returns:
        The amount in units of 1/:data:`UNIT`.

    Raises:
        TypeError: the value is not a real number, or is a bool.
        ValueError: the value is negative, NaN, infinite, non-zero but below 1/10000, a
            non-whole GPU amount above 1, or a non-whole number of memory bytes.
    """
    name = label if label is not None else f"resource {key!r}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}={value!r}: expected {_ALLOWED}, got {type(value).__name__}")
    units = _exact_units(name, value)
    if key == GPU and units > UNIT and units % UNIT:
        raise ValueError(
            f"{name}={value!r}: a GPU amount above 1 must be whole (a fraction is placed on one "
            "device and never split); use e.g. 1, 2 or a fraction such as 0.5"
        )
    if key == MEMORY and units % UNIT:
        raise ValueError(f"{name}={value!r}: memory is a number of bytes and must be whole")
    return units


def _exact_units(name: str, value: numbers.Real) -> int:
    """``value`` on the 1/10000 grid: exact when it is on it, else cut toward zero."""
    if isinstance(value, numbers.Integral):
        whole = int(value)
        if whole < 0:
            raise ValueError(f"{name}={value!r}: must be non-negative; expected {_ALLOWED}")
        return whole * UNIT
    if isinstance(value, numbers.Rational):
        exact = Fraction(int(value.numerator), int(value.denominator))
    else:
        as_float = float(value)
        if not math.isfinite(as_float) or as_float < 0:
            raise ValueError(f"{name}={value!r}: expected {_ALLOWED}")
        if as_float.is_integer():
            return int(as_float) * UNIT
        units = round(as_float * UNIT)
        # r / UNIT is correctly rounded, so it equals the float exactly when the float is the
        # double nearest a decimal with at most four places (its shortest repr): keep that.
        if units / UNIT == as_float:
            return units
        exact = Fraction(as_float)
    if exact < 0:
        raise ValueError(f"{name}={value!r}: must be non-negative; expected {_ALLOWED}")
    units = math.floor(exact * UNIT)  # Ray's rule: cut toward zero onto the grid
    if units == 0 and exact > 0:
        raise ValueError(
            f"{name}={value!r}: below 1/10000, the finest amount there is (Ray refuses it "
            "too); use 0 or at least 0.0001"
        )
    return units


def format_amount(key: str, units: int) -> str:
    """Render an amount in units for messages: ``2``, ``0.5``, ``1.5 GiB`` style for memory."""
    if key == MEMORY:
        nbytes = units // UNIT
        for suffix, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if nbytes >= size:
                return f"{nbytes / size:.4g} {suffix}"
        return f"{nbytes} B"
    whole, frac = divmod(units, UNIT)
    if not frac:
        return str(whole)
    return f"{units / UNIT:.4f}".rstrip("0")


class Resources:
    """An immutable, hashable bundle of exact resource amounts.

    Build one with :func:`parse_resources` (or ``Resources({"CPU": 1})``). Amounts are compared
    and combined exactly: ``+`` adds, ``-`` subtracts (``ValueError`` when the result would be
    negative), ``a <= b`` means every amount of ``a`` fits in ``b``. The order is partial:
    neither ``{"CPU": 1} <= {"GPU": 1}`` nor the reverse holds.
    """

    # Slots for speed: Resources values sit on the broker's hot path.
    __slots__ = ("_gpu", "_hash", "_items", "_map", "_other")

    _items: tuple[tuple[str, int], ...]
    _map: dict[str, int]
    _other: tuple[tuple[str, int], ...]
    _gpu: int
    _hash: int

    def __init__(self, spec: Mapping[str, object] | None = None) -> None:
        """Parse a user dict; see :func:`parse_resources` for the rules."""
        units = _parse_units(spec) if spec else {}
        self._init_units(units)

    def _init_units(self, units: dict[str, int]) -> None:
        items = tuple(sorted(units.items()))
        self._items = items
        self._map = dict(items)
        self._gpu = units.get(GPU, 0)
        self._other = tuple(kv for kv in items if kv[0] != GPU)
        self._hash = hash(items)

    @classmethod
    def from_units(cls, units: Mapping[str, int]) -> Resources:
        """Build from already-validated fixed-point units; zero entries are dropped."""
        self = cls.__new__(cls)
        self._init_units({k: v for k, v in units.items() if v})
        return self

    @property
    def gpu_units(self) -> int:
        """The GPU amount in units (``UNIT`` = one whole device)."""
        return self._gpu

    @property
    def other_units(self) -> tuple[tuple[str, int], ...]:
        """Every non-GPU ``(name, units)`` pair, sorted by name."""
        return self._other

    def units(self, name: str) -> int:
        """The amount of ``name`` in units (0 when absent)."""
        return self._map.get(name, 0)

    def items_units(self) -> tuple[tuple[str, int], ...]:
        """Every ``(name, units)`` pair, sorted by name."""
        return self._items

    def get(self, name: str, default: float = 0.0) -> float:
        """The amount of ``name`` as a float (whole bytes for memory)."""
        units = self._map.get(name)
        return default if units is None else _to_user(name, units)

    def to_dict(self) -> dict[str, float]:
        """Amounts as a plain dict: floats, except ``memory`` as whole bytes (an ``int``)."""
        return {k: _to_user(k, v) for k, v in self._items}

    def is_empty(self) -> bool:
        """Whether nothing at all is asked for."""
        return not self._items

    def __bool__(self) -> bool:
        return bool(self._items)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return self._items == other._items

    def __le__(self, other: Resources) -> bool:
        omap = other._map
        return all(omap.get(k, 0) >= v for k, v in self._items)

    def __ge__(self, other: Resources) -> bool:
        return other.__le__(self)

    def __lt__(self, other: Resources) -> bool:
        return self != other and self <= other

    def __gt__(self, other: Resources) -> bool:
        return self != other and other <= self

    def __add__(self, other: Resources) -> Resources:
        total = dict(self._map)
        for k, v in other._items:
            total[k] = total.get(k, 0) + v
        return Resources.from_units(total)

    def __sub__(self, other: Resources) -> Resources:
        rest = dict(self._map)
        for k, v in other._items:
            left = rest.get(k, 0) - v
            if left < 0:
                raise ValueError(f"cannot subtract {other} from {self}: {k} would be negative")
            rest[k] = left
        return Resources.from_units(rest)

    def __repr__(self) -> str:
        return f"Resources({self.to_dict()!r})"

    def __str__(self) -> str:
        if not self._items:
            return "{}"
        inner = ", ".join(f"{k}: {format_amount(k, v)}" for k, v in self._items)
        return "{" + inner + "}"


Resources.__module__ = "actorrt.resources"

EMPTY = Resources()


def _to_user(name: str, units: int) -> float:
    if name == MEMORY:
        return units // UNIT
    return units / UNIT


def _parse_units(spec: Mapping[str, object]) -> dict[str, int]:
    if not isinstance(spec, Mapping):
        raise TypeError(
            f"resources must be a dict of name -> amount, got {type(spec).__name__}: {spec!r}"
        )
    units: dict[str, int] = {}
    given: dict[str, str] = {}
    for raw_key, value in spec.items():
        if not isinstance(raw_key, str) or not raw_key:
            raise TypeError(f"resource names must be non-empty strings, got {raw_key!r}")
        key = _ALIASES.get(raw_key, raw_key)
        amount = to_units(key, value, label=f"resource {raw_key!r}")
        if key in units and units[key] != amount:
            raise ValueError(
                f"resource {key!r} is given twice with different values "
                f"({given[key]!r}={spec[given[key]]!r} and {raw_key!r}={value!r}); give one"
            )
        units[key] = amount
        given[key] = raw_key
    return {k: v for k, v in units.items() if v}


def parse_resources(spec: Mapping[str, object] | Resources | None) -> Resources:
    """Parse a resource dict (``{"CPU": 1, "GPU": 0.5, "memory": 2**30, "custom": 1}``).

    Args:
        spec: the dict, an existing :class:`Resources` (returned as is) or ``None`` (empty).

    Returns:
        The exact, immutable value.

    Raises:
        TypeError: a name is not a string, or an amount is not a number (bool included).
        ValueError: an amount is negative, NaN, infinite or non-zero below 1/10000; a GPU amount
            above 1 is fractional; memory is not whole bytes; ``cpu`` and ``CPU`` (or ``gpu``
            and ``GPU``) disagree.
    """
    if spec is None:
        return EMPTY
    if isinstance(spec, Resources):
        return spec
    return Resources(spec)


def resources_from_options(
    *,
    num_cpus: object = None,
    num_gpus: object = None,
    memory: object = None,
    resources: Mapping[str, object] | None = None,
) -> Resources:
    """Combine actor options into one :class:`Resources`.

    Args:
        num_cpus: CPUs (``None``: none).
        num_gpus: GPUs (``None``: none); above 1 must be whole.
        memory: bytes (``None``: none).
        resources: custom resources; ``CPU``, ``GPU`` and ``memory`` (any spelling) are not
            allowed here, use the dedicated options.

    Raises:
        TypeError: as :func:`parse_resources`, naming the option.
        ValueError: as :func:`parse_resources`, or a built-in name inside ``resources``.
    """
    units: dict[str, int] = {}
    for key, option, value in (
        (CPU, "num_cpus", num_cpus),
        (GPU, "num_gpus", num_gpus),
        (MEMORY, "memory", memory),
    ):
        if value is not None:
            units[key] = to_units(key, value, label=option)
    if resources:
        if not isinstance(resources, Mapping):
            raise TypeError(f"resources= must be a dict, got {type(resources).__name__}")
        for key in resources:
            if isinstance(key, str) and _ALIASES.get(key, key) in (CPU, GPU, MEMORY):
                raise ValueError(
                    f"resources={dict(resources)!r}: {key!r} is not allowed in resources=; "
                    "use num_cpus=, num_gpus= or memory="
                )
        units.update(_parse_units(resources))
    return Resources.from_units(units)
