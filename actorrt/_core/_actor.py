"""Making classes spawnable: ``@actorrt.actor``, ``ActorClass`` and ``actorrt.spawn``."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

from ._current import current_services
from ._options import ActorOptions
from ._ref import RESERVED_NAMES, ActorRef
from ._streams import stream_methods

A = TypeVar("A")

HOOKS = frozenset({"on_start", "on_stop"})


class ActorClass(Generic[A]):
    """A class made spawnable, with default options.

    ``await Worker.spawn(*args, **kwargs)`` starts an actor and returns its ref;
    ``Worker.options(name="w0").spawn(...)`` overrides options for one spawn. The class
    itself is ``Worker.cls``; calling ``Worker(...)`` directly is an error, since an actor's
    instance lives behind its mailbox.
    """

    def __init__(
        self, cls: type[A], options: ActorOptions, origin: tuple[str, str] | None = None
    ) -> None:
        self.cls = cls
        self.actor_options = options
        # (module, qualname) where the decorated class can be imported from, if anywhere.
        self.origin = origin
        self.method_table = _method_table(cls)
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__module__ = cls.__module__
        self.__doc__ = cls.__doc__

    def options(self, **options: Any) -> ActorClass[A]:
        """This class with some options changed (validated now). See ``ActorOptions``."""
        clone: ActorClass[A] = ActorClass.__new__(ActorClass)
        clone.__dict__.update(self.__dict__)
        clone.actor_options = self.actor_options.merged(**options)
        return clone

    async def spawn(self, *args: Any, **kwargs: Any) -> ActorRef[A]:
        """Start an actor of this class; return its ref once its constructor and
        ``on_start`` have run. Raises what they raised. Cancelling the spawn ends the actor.
        """
        ref: ActorRef[A] = await current_services().spawn(self, args, kwargs)
        return ref

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{self.__name__} is an actor class: start one with "
            f"`await {self.__name__}.spawn(...)`, not `{self.__name__}(...)`"
        )

    def __getattr__(self, name: str) -> Any:
        # Only for names the class does not have: Ray's spellings get a pointer.
        if name == "remote":
            raise AttributeError(
                f"{self.__name__}.remote(...) is Ray's spelling: actorrt starts an actor with "
                f"`ref = await {self.__name__}.spawn(...)`, or "
                f"`ref = actorrt.get({self.__name__}.spawn(...))` in synchronous code; it "
                "returns once the constructor has run (docs/porting.md)",
                name=name,
                obj=self,
            )
        raise AttributeError(
            f"actor class {self.__dict__.get('__name__', '?')} has no attribute {name!r}",
            name=name,
            obj=self,
        )

    def __repr__(self) -> str:
        return f"<actorrt.ActorClass {self.__module__}.{self.__qualname__}>"

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent by name when the other process can import it (cheap, and its module's
        # state stays its own); else by value, the class pickled with cloudpickle.
        options = self.actor_options.portable()
        if self.origin is not None and self.origin[0] != "__main__":
            return (_load_actor_class, (*self.origin, options))
        return (ActorClass, (self.cls, options, self.origin))


def _load_actor_class(module: str, qualname: str, options: ActorOptions) -> ActorClass[Any]:
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not isinstance(found, ActorClass):
        raise TypeError(f"{module}.{qualname} is not an actor class here")
    clone: ActorClass[Any] = ActorClass.__new__(ActorClass)
    clone.__dict__.update(found.__dict__)
    clone.actor_options = options
    return clone


@overload
def actor(cls: type[A], /) -> ActorClass[A]: ...


@overload
def actor(
    cls: None = None, /, **options: Any
) -> Callable[[type[A]], ActorClass[A]]: ...


def actor(
    cls: type[A] | None = None, /, **options: Any
) -> ActorClass[A] | Callable[[type[A]], ActorClass[A]]:
    """Make a class spawnable, as ``@actorrt.actor`` or ``@actorrt.actor(**options)``.

    Options are validated here (see ``ActorOptions``). Public methods (names not starting
    with ``_``) become callable through refs; ``on_start`` and ``on_stop`` are hooks, not
    methods. A class may not define ``stop``, ``kill``, ``wait_stopped`` or ``actor_id``:
    refs keep those names for themselves.
    """
    defaults = ActorOptions().merged(**options)

    def wrap(target: type[A]) -> ActorClass[A]:
        checked = _check_class(target)
        origin = None if "<locals>" in checked.__qualname__ else (
            checked.__module__, checked.__qualname__
        )
        return ActorClass(checked, defaults, origin)

    if cls is None:
        return wrap
    return wrap(cls)


async def spawn(cls: type[A] | ActorClass[A], /, *args: Any, **kwargs: Any) -> ActorRef[A]:
    """Start an actor of ``cls`` (a plain class or an ``ActorClass``) with its default options."""
    if isinstance(cls, ActorClass):
        return await cls.spawn(*args, **kwargs)
    return await ActorClass(_check_class(cls), ActorOptions()).spawn(*args, **kwargs)


def _check_class(target: Any) -> Any:
    if isinstance(target, ActorClass):
        raise TypeError(f"{target.__name__} is already an actor class")
    if not inspect.isclass(target):
        raise TypeError(
            f"actors are made from classes; got {target!r} ({type(target).__name__})"
        )
    return target


def _method_table(cls: type[Any]) -> dict[str, tuple[Callable[..., Any], bool]]:
    """Public methods as ``name -> (function taking the instance first, is_async)``."""
    table: dict[str, tuple[Callable[..., Any], bool]] = {}
    for name in dir(cls):
        if name.startswith("_") or name in HOOKS:
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, staticmethod | classmethod):
            func = getattr(cls, name)
            table[name] = (_drop_instance(func), inspect.iscoroutinefunction(func))
        elif inspect.isfunction(raw):
            table[name] = (raw, inspect.iscoroutinefunction(raw))
        else:
            continue
        generator = inspect.unwrap(getattr(cls, name))
        if inspect.isgeneratorfunction(generator) or inspect.isasyncgenfunction(generator):
            # Streamed: three messages of the actor (``_core._streams``).
            start = table.pop(name)[0]
            table.update(stream_methods(name, start, inspect.isasyncgenfunction(generator)))
        if name in RESERVED_NAMES:
            raise TypeError(
                f"{cls.__name__} defines {name!r}, a name actor refs keep for themselves "
                f"({', '.join(sorted(RESERVED_NAMES))}); rename the method"
            )
    return table


def _drop_instance(func: Callable[..., Any]) -> Callable[..., Any]:
    def call(_instance: Any, *args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return call
