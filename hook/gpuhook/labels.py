"""`gpuhook labels`: node facts as a Node Feature Discovery local feature file (one key=value a line).

NFD publishes each key as feature.node.kubernetes.io/<key>, so pods can be placed by vendor, GPU count,
driver, CUDA or ROCm version and gfx target. Reads the host; the CLI writes the file.
"""

from __future__ import annotations

import os

from gpuhook.errors import DiscoveryError
from gpuhook.inventory import Inventory
from gpuhook.root import Root

DEFAULT_PATH = "/etc/kubernetes/node-feature-discovery/features.d/gpuhook"


def labels(inventory: Inventory, root: Root) -> dict[str, str]:
    """The labels for this node (values NFD accepts: letters, digits, '-', '_', '.')."""
    out: dict[str, str] = {}
    for inv in inventory.vendors:
        key = f"gpuhook-{inv.vendor}"
        out[f"{key}.present"] = "true"
        out[f"{key}.count"] = str(len(inv.gpus))
        if inv.driver_version:
            out[f"{key}.driver"] = inv.driver_version
        if inv.vendor == "nvidia":
            cuda = _cuda(inv, root)
            if cuda:
                out[f"{key}.cuda"] = cuda
        else:
            from gpuhook import rocm

            release = rocm.release_of_driver(inv.driver_version) if inv.driver_version else None
            if release:
                out[f"{key}.rocm"] = release
            if not inv.driver_version:
                out[f"{key}.in-tree"] = "true"
            targets = sorted({g.arch for g in inv.gpus if g.arch})
            if targets:
                out[f"{key}.gfx"] = "_".join(targets)
    return out


def render(values: dict[str, str]) -> str:
    """The feature file's text."""
    return "".join(f"{k}={v}\n" for k, v in sorted(values.items()))


def _cuda(inv: object, root: Root) -> str | None:
    from gpuhook import libcuda

    files = getattr(inv, "files", ())
    lib = next((f.source for f in files if os.path.basename(f.source).startswith("libcuda.so.")), None)
    if lib is None:
        return None
    try:
        return libcuda.driver_cuda_version(root.lexical(lib))
    except DiscoveryError:
        return None
