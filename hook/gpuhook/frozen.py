"""`@frozen`: frozen, slotted value classes, as `@dataclass(frozen=True, slots=True)` makes them.

Why not dataclasses itself: importing `dataclasses` (it pulls in inspect, ast, enum) and generating six
methods per class with exec costs ~30 ms on the shim's GPU path, before every GPU container starts
(measured with tests/perf/bench.py). This gives the same contract with shared methods and one type()
call per class. Type checkers see it as a dataclass (PEP 681 dataclass_transform), so fields, defaults
and immutability are still checked statically.

Supported: annotated fields in order, defaults (immutable values only: no default_factory), keyword
construction (and positional, for records of at most four fields: a wider one is built with keywords only, so
that a reordering of its fields is never silent), ==, hash, repr, no attribute assignment after construction,
and `replace`.
"""

from __future__ import annotations

KEYWORDS_ONLY_ABOVE = 4  # a record with more fields than this is built with keywords only

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar, dataclass_transform

    T = TypeVar("T")

    @dataclass_transform(frozen_default=True)
    def frozen(cls: type[T]) -> type[T]:
        """Make `cls` a frozen, slotted value class."""
        ...

    def replace(value: T, **changes: object) -> T:
        """A copy of a frozen value with some fields changed."""
        ...

else:

    _MISSING = object()

    def _init(self, *args, **kwargs):
        fields = self._fields
        if args:
            _positional(self, fields, args, kwargs)
            return
        names = self._names
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(f"{type(self).__name__}() got an unexpected argument {name!r}")
            object.__setattr__(self, name, value)
        if len(kwargs) < len(fields):
            for name in fields:
                if name not in kwargs:
                    _default(self, name)

    def _positional(self, fields, args, kwargs):
        if len(fields) > KEYWORDS_ONLY_ABOVE:
            raise TypeError(f"{type(self).__name__}() has {len(fields)} fields: build it with keywords "
                            f"({fields[0]}=..., ...), as every record of more than {KEYWORDS_ONLY_ABOVE} fields is")
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, got {len(args)}")
        for name, value in zip(fields, args, strict=False):  # args may be fewer: defaults follow
            object.__setattr__(self, name, value)
        for name, value in kwargs.items():
            if name not in fields or fields.index(name) < len(args):
                raise TypeError(f"{type(self).__name__}() got an unexpected or repeated argument {name!r}")
            object.__setattr__(self, name, value)
        for name in fields[len(args):]:
            if name not in kwargs:
                _default(self, name)

    def _default(self, name):
        default = self._defaults.get(name, _MISSING)
        if default is _MISSING:
            raise TypeError(f"{type(self).__name__}() is missing the argument {name!r}")
        object.__setattr__(self, name, default)

    def _values(self):
        return tuple(object.__getattribute__(self, name) for name in self._fields)

    def _eq(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) == _values(other)

    def _hash(self):
        return hash((self.__class__.__name__, *_values(self)))

    def _repr(self):
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, _values(self), strict=True))
        return f"{type(self).__qualname__}({inner})"

    def _frozen(self, name, value=None):
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is frozen")

    _METHODS = {"__init__": _init, "__eq__": _eq, "__hash__": _hash, "__repr__": _repr,
                "__setattr__": _frozen, "__delattr__": _frozen}

    def replace(value, **changes):
        """A copy of a frozen value with some fields changed."""
        return type(value)(**{f: changes.pop(f) if f in changes else getattr(value, f) for f in value._fields},
                           **changes)  # a name that is no field is refused by __init__

    def frozen(cls):
        """Make `cls` a frozen, slotted value class."""
        fields = tuple(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063 (inspect is what we avoid)
        ns = {k: v for k, v in cls.__dict__.items() if k not in fields and k not in ("__dict__", "__weakref__")}
        ns.update(_METHODS)
        ns["__slots__"] = fields
        ns["_fields"] = fields
        ns["_names"] = frozenset(fields)  # a keyword's check, in one step
        ns["_defaults"] = {f: cls.__dict__[f] for f in fields if f in cls.__dict__}
        ns["__match_args__"] = fields
        new = type(cls)(cls.__name__, cls.__bases__, ns)
        new.__qualname__ = cls.__qualname__
        return new

