"""JSON for the paths in front of a container start: CPython's C codec without the `json` package.

`import json` pulls in `re`, `enum` and `functools`: about 9 ms on a small VM, more than all of gpuhook's
own work for a GPU container. The C scanner and encoder that `json` itself uses live in `_json`, which
costs nothing to import; this module drives them the way `json.loads`/`json.dumps(separators=(",", ":"))`
do and gives the same results. Errors (the slow path) go through `json`, for its exact messages.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

try:
    import _json
except ImportError:  # an interpreter without the C accelerator: the json package does it all
    _json = None  # type: ignore[assignment]

_WHITESPACE = " \t\n\r"


class _Context:
    """The attributes `_json.make_scanner` reads from a decoder: json.loads's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(lambda name: float(name.replace("Infinity", "inf")))


def _refuse(o: object) -> object:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _encoder() -> Any:
    """A fresh C encoder for compact ASCII output (its cycle markers are left behind when an encoding fails)."""
    return _json.make_encoder({}, _refuse, _json.encode_basestring_ascii, None, ":", ",", False, False, True)


try:  # private to CPython: where its shape changed (a TypeError, a missing name), the json package does it all
    _scan = _json.make_scanner(_Context()) if _json is not None else None  # type: ignore[arg-type]  # duck-typed
    if _json is not None and "".join(_encoder()({"a": [1]}, 0)) != '{"a":[1]}':
        raise TypeError("_json.make_encoder writes something else")
except (TypeError, AttributeError, ValueError):
    _json, _scan = None, None  # type: ignore[assignment]


def loads(data: bytes | str) -> Any:
    """Parse one JSON document (UTF-8 bytes or text); ValueError (json.JSONDecodeError) when it is not."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if _scan is not None and not text.startswith("\ufeff"):
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = _scan(text, start)
        except Exception:  # StopIteration, ValueError, or the SystemError the C scanner raises when json.decoder
            pass  # (whose error class it wants) is not loaded: json.loads below says what is wrong, and where
        else:
            if not text[end:].strip(_WHITESPACE):
                return value
    import json

    return json.loads(text)


def dumps(value: Any) -> str:
    """`value` as compact ASCII JSON, as json.dumps(value, separators=(",", ":")) writes it."""
    if _json is None:
        import json

        return json.dumps(value, separators=(",", ":"))
    return "".join(_encoder()(value, 0))
