"""One ``__eq__``, ``__repr__`` and ``__hash__`` for the package's dataclasses.

On CPython 3.11 ``@dataclass`` compiles each method it generates from source, one ``exec`` per
method per class (about 70 µs each): with sixty-odd dataclasses, generating the same equality and
repr for every class was a sixth of ``import tinyagents`` (``benchmarks/import_time.py``). A
record class is declared with ``eq=False, repr=False`` and takes them from ``Record`` (or
``FrozenRecord`` for a frozen one), in the dataclass's shape: equal when of the same class with
equal compared fields in order, the repr lists the ``repr=True`` fields, a mutable record is
unhashable and a frozen one hashes its compared fields::

    @dataclass(slots=True, kw_only=True, eq=False, repr=False)
    class Usage(Record):
        input_tokens: int = 0

``tests/test_import_cost.py`` checks every dataclass of the package is declared this way (or
compares by identity on purpose) and that the two agree with what ``@dataclass`` generates.

The ``__init__`` is one ``exec`` too, and the longest (an event's takes some twenty keyword
parameters): ``@record`` (``@dataclass`` for type checkers, same arguments) declares the class
with ``init=False`` and gives it an ``__init__`` (``_DeferredInit``) that, on the class's first
instance, has ``@dataclass`` generate the real one (on a throwaway subclass: the same fields,
defaults, ``__post_init__``, frozen or slotted), puts it on the class and calls it; later
instances call the generated one directly. A class never instantiated never pays for it.
``inspect.signature`` of the class reads the generated one's from the class's creation on
(reading it generates it).
"""

from __future__ import annotations

import inspect
import reprlib
import types
from dataclasses import dataclass, field, fields
from typing import Any, dataclass_transform


@dataclass_transform(field_specifiers=(field,))
def record(cls: type | None = None, /, **params: Any) -> Any:
    """``@dataclass(**params)`` whose ``__init__`` is generated with the first instance (the
    module's docstring); a class that writes its own ``__init__`` (or says ``init=False``)
    keeps it. Type checkers read it as ``@dataclass`` (``dataclass_transform``)."""
    deferred = params.pop("init", True)

    def wrap(cls: type) -> Any:
        made: Any = dataclass(cls, init=False, **params)  # a new class when slots=True
        if deferred and "__init__" not in vars(cls):
            made.__init__ = _DeferredInit(made)
        return made

    return wrap if cls is None else wrap(cls)


class _DeferredInit:
    """A record class's ``__init__`` until its first instance: it has ``@dataclass`` generate
    the real one (``_generated_init``), puts it on the class and calls it. Its signature is
    the generated one's (``inspect.signature`` of the class or of its ``__init__``), which
    reading it generates: a class no one builds or reads the signature of never pays for it."""

    def __init__(self, cls: type) -> None:
        self._cls = cls
        self._init: Any = None
        # named as the generated function is (and, as it, with no docstring)
        self.__name__ = "__init__"
        self.__qualname__ = f"{cls.__qualname__}.__init__"
        self.__module__ = cls.__module__
        self.__doc__ = None

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    def __call__(self, instance: object, /, *args: Any, **kwargs: Any) -> None:
        self._generated()(instance, *args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self._generated())

    def _generated(self) -> Any:
        if self._init is None:
            self._init = _generated_init(self._cls)
            setattr(self._cls, "__init__", self._init)  # noqa: B010  # what later instances call
        return self._init


def _generated_init(cls: type) -> Any:
    """The ``__init__`` ``@dataclass`` generates for ``cls``: that of a subclass declaring no
    field of its own (so it takes ``cls``'s fields, in order, with their defaults)."""
    namespace = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,  # else @dataclass writes one from the signature
    }
    twin = type(cls.__name__, (cls,), namespace)
    frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    # slots: a field with init=False and a default is set by __init__ (a slot has no default)
    slots = "__slots__" in vars(cls)
    made: Any = dataclass(twin, eq=False, repr=False, frozen=frozen, slots=slots)
    return vars(made)["__init__"]


class Record:
    """Equality and repr of a mutable dataclass declared with ``eq=False, repr=False``."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _compared(self) == _compared(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)  # type: ignore[arg-type]
        return f"{type(self).__qualname__}({shown})"


class FrozenRecord(Record):
    """``Record`` for a ``frozen=True`` dataclass: hashable by its compared fields."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]  # a mutable record has none
        return hash(_compared(self))


def _compared(record: Record) -> tuple[Any, ...]:
    return tuple(getattr(record, f.name) for f in fields(record) if f.compare)  # type: ignore[arg-type]
