"""config.json: read a bundle's spec, add Edits to the raw dict, write it back atomically."""

from __future__ import annotations

import marshal
import os

from gpuhook import fastjson
from gpuhook.apply.spec_edits import SpecContext, apply
from gpuhook.atomic import write_text
from gpuhook.edits import Edits
from gpuhook.errors import SpecError
from gpuhook.statefile import read_bounded

MAX_SPEC = 16 << 20  # as the shim and its native front end: larger is not a bundle's config

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Spec = dict[str, Any]


def load_spec(data: bytes, path: str) -> Spec:
    """Parse config.json bytes; SpecError when they are not a JSON object."""
    try:
        spec = fastjson.loads(data)
    except fastjson.TooDeep as e:
        raise SpecError(f"{path} nests too deeply to be an OCI config ({e})") from e
    except ValueError as e:
        raise SpecError(f"{path} is not valid JSON ({e}); the bundle is broken, not the GPU request") from e
    except RecursionError as e:
        raise SpecError(f"{path} nests too deeply to be an OCI config") from e
    if not isinstance(spec, dict):
        raise SpecError(f"{path} is not a JSON object")
    check_shape(spec, path)
    return spec


# The fields gpuhook reads or writes, and their JSON types. null is accepted wherever runc's Go decoding takes it:
# for a field or a map value or list item of a string or number (it decodes to "" or 0, or to nil for a pointer
# such as a device rule's major); readers take it so.
_OBJECT, _LIST, _STR, _INT = dict, list, str, int
_SHAPE: tuple[tuple[str, type, type | None], ...] = (  # (path, type, type of each item or value)
    ("annotations", _OBJECT, _STR), ("root", _OBJECT, None), ("root.path", _STR, None),
    ("process", _OBJECT, None), ("process.env", _LIST, _STR), ("process.user", _OBJECT, None),
    ("process.user.uid", _INT, None), ("process.user.gid", _INT, None), ("process.user.additionalGids", _LIST, _INT),
    ("mounts", _LIST, _OBJECT), ("linux", _OBJECT, None), ("linux.devices", _LIST, _OBJECT),
    ("linux.resources", _OBJECT, None), ("linux.resources.devices", _LIST, _OBJECT),
    ("linux.maskedPaths", _LIST, _STR), ("hooks", _OBJECT, _LIST),
)


def check_shape(spec: Spec, path: str = "config.json") -> None:
    """SpecError naming the first field gpuhook uses that has the wrong JSON type (null counts as absent)."""
    for field, kind, item in _SHAPE:
        value: Any = spec
        for key in field.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise SpecError(f"{path}: {field} is {_json_type(value)}, expected {_json_type(kind())} (or null)")
        if item is None:
            continue
        for v in _items(value):  # a null string or number is "" or 0 to runc; a null object or list is not taken
            if (v is not None or item in (_OBJECT, _LIST)) and not (isinstance(v, item) and not isinstance(v, bool)) \
                    and not (item is _LIST and v is None):
                raise SpecError(f"{path}: {field} holds {_json_type(v)}, expected {_json_type(item())} items")
    for m in spec.get("mounts") or []:
        if not isinstance(m.get("destination", ""), str) or not isinstance(m.get("options") or [], list):
            raise SpecError(f"{path}: a mount's destination or options have the wrong type")
    linux = spec.get("linux") or {}
    for field, entries in (("linux.devices", linux.get("devices")),
                           ("linux.resources.devices", (linux.get("resources") or {}).get("devices"))):
        for d in entries or []:
            if any(not isinstance(d.get(k) or 0, int) or isinstance(d.get(k), bool) for k in ("major", "minor")):
                raise SpecError(f"{path}: an entry of {field} has a major or minor that is not a number")
    for stage, hooks in (spec.get("hooks") or {}).items():
        for h in hooks or []:
            if not isinstance(h, dict) or not isinstance(h.get("args") or [], list):
                raise SpecError(f"{path}: hooks.{stage} holds {_json_type(h)}, expected hook objects")


def _items(value: Any) -> list[Any]:
    """An object's values or a list's items."""
    return list(value.values()) if isinstance(value, dict) else list(value)


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def read_spec(bundle: str) -> Spec:
    """The bundle's config.json; SpecError when it cannot be read. Reads a file."""
    path = os.path.join(bundle, "config.json")
    try:
        return load_spec(read_bounded(path, MAX_SPEC), path)
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}") from e


def rootfs(spec: Spec, bundle: str) -> str:
    """The absolute path of the container's root filesystem."""
    root = (spec.get("root") or {}).get("path") or "rootfs"
    return os.path.normpath(os.path.join(os.path.abspath(bundle), root))


def apply_edits(spec: Spec, edits: Edits, root_path: str, ldconfig: str) -> Spec:
    """A copy of `spec` with the edits added, with the default hook settings (see apply_with)."""
    return apply_with(spec, edits, SpecContext(root_path=root_path, ldconfig=ldconfig))


def apply_with(spec: Spec, edits: Edits, ctx: SpecContext) -> Spec:
    """A copy of `spec` with the edits added (idempotent: what is already there is not added twice)."""
    out: Spec = marshal.loads(marshal.dumps(spec))  # a deep copy; JSON values are all marshal knows
    apply(edits, out, ctx)
    return out


def drop_hooks(spec: Spec, stage: str, matches: Callable[[object], bool]) -> None:
    """Remove the `stage` hooks `matches` picks from `spec` (a copy being edited); the stage goes if emptied."""
    hooks = spec.get("hooks") or {}
    kept = [h for h in hooks.get(stage) or [] if not matches(h)]
    if len(kept) != len(hooks.get(stage) or []):
        if kept:
            hooks[stage] = kept
        else:
            del hooks[stage]


def write_atomic(path: str, spec: Spec) -> None:
    """Replace `path` with `spec` as JSON, atomically, keeping the file mode; not fsynced (atomic.py). Writes a
    file."""
    write_text(path, fastjson.dumps(spec), durable=False)
