"""JSON for the paths in front of a container start: CPython's C codec without the `json` package.

`import json` pulls in `re`, `enum` and `functools`: about 9 ms on a small VM, more than all of gpuhook's
own work for a GPU container. The C scanner and encoder that `json` itself uses live in `_json`, which
costs nothing to import; this module drives them the way `json.loads`/`json.dumps(separators=(",", ":"))`
do and gives the same results. Errors (the slow path) go through `json`, for its exact messages.

Every document is bounded in depth (MAX_DEPTH levels of arrays and objects, or the caller's): deeper nesting is
a TooDeep (a ValueError), never the RecursionError a decoder, an encoder or a schema check would raise further
on. `check_depth` bounds what other parsers (tomllib, tomlkit, PyYAML) returned the same way, and `loads_pruned`
is for documents that carry a stranger's nested data gpuhook does not read (an API server's answer holding a pod
author's opaque parameters): past the bound each subtree is cut to a marker, and the rest is read.
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
MAX_DEPTH = 64  # levels of arrays and objects: gpuhook's own documents need under 10, an API object under 20
PRUNED = "<nested too deep: not read by gpuhook>"


class TooDeep(ValueError):
    """A document nested deeper than its bound."""


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


def loads(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse one JSON document (UTF-8 bytes or text); ValueError (json.JSONDecodeError) when it is not, TooDeep
    when it nests deeper than `max_depth`."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    value = _parse(text, max_depth)
    if text.count("[") + text.count("{") > max_depth:  # fewer brackets cannot nest deeper: no walk needed
        check_depth(value, max_depth)
    return value


def loads_pruned(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse one JSON document as `loads` does, but with every array or object deeper than `max_depth`, and every
    integer too long for Python to read (sys.get_int_max_str_digits: 4,300 digits), replaced by the string PRUNED
    instead of refused; ValueError when it is no JSON."""
    try:
        return loads(data, max_depth)
    except TooDeep:
        pass
    except ValueError as e:
        if "integer string conversion" not in str(e):  # Python's own limit on an integer's digits
            raise
    import re

    text = data.decode("utf-8") if isinstance(data, bytes) else data
    kept, depth, last, cut = [], 0, 0, -1
    # strings whole (brackets and digits in them are text), brackets, and integers of 1,000 digits or more
    for m in re.finditer(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|(?<![\d.eE+-])-?\d{1000,}(?![\d.eE])', text):
        token = m.group()
        if token[-1].isdigit():
            if depth <= max_depth and cut < 0:
                kept += [text[last:m.start()], '"', PRUNED, '"']
                last = m.end()
        elif token in "[{":
            depth += 1
            if depth == max_depth + 1:
                cut = m.start()
        elif token in "]}":
            if depth == max_depth + 1 and cut >= 0:
                kept += [text[last:cut], '"', PRUNED, '"']
                last, cut = m.end(), -1
            depth -= 1
    return loads("".join([*kept, text[last:]]), max_depth)


def check_depth(value: Any, max_depth: int = MAX_DEPTH, what: str = "the document") -> None:
    """TooDeep when `value` (parsed JSON, TOML or YAML: dicts and lists) nests deeper than `max_depth`. Walks
    without recursion."""
    level = [value] if isinstance(value, (dict, list, tuple)) else []
    for _ in range(max_depth):  # one level at a time: each pass keeps only the containers inside the last
        if not level:
            return
        level = [child for item in level for child in (item.values() if isinstance(item, dict) else item)
                 if isinstance(child, (dict, list, tuple))]
    if level:
        raise TooDeep(f"{what} nests deeper than {max_depth} levels")


def _parse(text: str, max_depth: int) -> Any:
    try:
        if _scan is not None and not text.startswith("\ufeff"):
            start = len(text) - len(text.lstrip(_WHITESPACE))
            try:
                value, end = _scan(text, start)
            except RecursionError:
                raise
            except Exception:  # StopIteration, ValueError, or the SystemError the C scanner raises when
                pass  # json.decoder (whose error class it wants) is not loaded: json.loads below says what is wrong
            else:
                if not text[end:].strip(_WHITESPACE):
                    return value
        import json

        return json.loads(text)
    except RecursionError:
        raise TooDeep(f"the document nests deeper than {max_depth} levels") from None


def dumps(value: Any) -> str:
    """`value` as compact ASCII JSON, as json.dumps(value, separators=(",", ":")) writes it."""
    if _json is None:
        import json

        return json.dumps(value, separators=(",", ":"))
    return "".join(_encoder()(value, 0))
