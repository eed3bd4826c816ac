"""`gpuhook labels`: node facts as a Node Feature Discovery local feature file (one key=value a line).

NFD publishes each key as feature.node.kubernetes.io/<key>, so pods can be placed by vendor, GPU count,
driver, and what each vendor adds (CUDA or ROCm version, gfx target). Reads the host; the CLI writes the file.
"""

from __future__ import annotations

from gpuhook.host.inventory import Inventory
from gpuhook.host.root import Root
from gpuhook.vendors.registry import get

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
        out.update({f"{key}.{k}": v for k, v in get(inv.vendor).labels(inv, root).items()})
    return out


def render(values: dict[str, str]) -> str:
    """The feature file's text."""
    return "".join(f"{k}={v}\n" for k, v in sorted(values.items()))
