"""The host's ROCm user-space trees (/opt/rocm-<version>, and where /opt/rocm points), for gpuhook.dev/host-rocm."""

from __future__ import annotations

import os

from gpuhook.frozen import frozen
from gpuhook.host.root import Root
from gpuhook.request.requirements import version_tuple


@frozen
class RocmTree:
    """One ROCm user-space tree on the host."""

    version: str
    path: str  # /opt/rocm-<version>
    lib_dirs: tuple[str, ...]
    default: bool = False  # /opt/rocm points at it


def discover_trees(root: Root) -> tuple[RocmTree, ...]:
    """ROCm trees under the host's /opt, oldest first. Reads files."""
    default = os.path.basename(root.to_host(root.resolve("/opt/rocm"))) if root.exists("/opt/rocm") else ""
    trees = []
    for name in root.listdir("/opt"):
        if not name.startswith("rocm-") or not root.exists(f"/opt/{name}/.info/version"):
            continue
        version = root.read_text(f"/opt/{name}/.info/version").strip().split("-")[0]
        libs = tuple(f"/opt/{name}/{d}" for d in ("lib", "lib64") if os.path.isdir(root.lexical(f"/opt/{name}/{d}")))
        trees.append(RocmTree(version, f"/opt/{name}", libs, name == default))
    return tuple(sorted(trees, key=lambda t: version_tuple(t.version)))
