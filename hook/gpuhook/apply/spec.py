"""config.json: read a bundle's spec, add Edits to the raw dict, write it back atomically."""

from __future__ import annotations

import marshal
import os

from gpuhook import fastjson
from gpuhook.atomic import write_text
from gpuhook.edits import Edits, SpecContext
from gpuhook.errors import SpecError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Spec = dict[str, Any]


def load_spec(data: bytes, path: str) -> Spec:
    """Parse config.json bytes; SpecError when they are not a JSON object."""
    try:
        spec = fastjson.loads(data)
    except ValueError as e:
        raise SpecError(f"{path} is not valid JSON ({e}); the bundle is broken, not the GPU request") from e
    if not isinstance(spec, dict):
        raise SpecError(f"{path} is not a JSON object")
    return spec


def read_spec(bundle: str) -> Spec:
    """The bundle's config.json; SpecError when it cannot be read. Reads a file."""
    path = os.path.join(bundle, "config.json")
    try:
        with open(path, "rb") as f:
            return load_spec(f.read(), path)
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}") from e


def rootfs(spec: Spec, bundle: str) -> str:
    """The absolute path of the container's root filesystem."""
    root = spec.get("root", {}).get("path", "rootfs")
    return os.path.normpath(os.path.join(os.path.abspath(bundle), root))


def apply_edits(spec: Spec, edits: Edits, root_path: str, ldconfig: str) -> Spec:
    """A copy of `spec` with the edits added (idempotent: what is already there is not added twice)."""
    out: Spec = marshal.loads(marshal.dumps(spec))  # a deep copy; JSON values are all marshal knows
    edits.apply_to(out, SpecContext(root_path, ldconfig))
    return out


def write_atomic(path: str, spec: Spec) -> None:
    """Replace `path` with `spec` as JSON, atomically, keeping the file mode. Writes a file."""
    write_text(path, fastjson.dumps(spec))
