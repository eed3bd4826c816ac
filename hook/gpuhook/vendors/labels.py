"""`gpuhook labels`: node facts as a Node Feature Discovery local feature file (one key=value a line).

Three kinds of keys:
- gpuhook's own, unprefixed (`gpuhook-nvidia.count`, ...): NFD publishes them as feature.node.kubernetes.io/<key>;
- each vendor's labeller's names with their prefix (`nvidia.com/gpu.product` as GPU Feature Discovery writes
  it, `amd.com/gpu.family` as AMD's node labeller does), which NFD >= 0.13 publishes as they are, so that
  nodeSelectors written for those tools keep working (vendors/nvidia/node_labels.py, vendors/amd/node_labels.py);
- `gpuhook.feature.node.kubernetes.io/accelerator=<vendor>`, the vendor with the most GPUs (the first in
  registry order on a tie), and `.../accelerator.<vendor>=true` for each vendor with GPUs.
A key or value Kubernetes would refuse is left out, never written broken (NFD would drop it anyway).
Reads the host; the CLI writes the file.
"""

from __future__ import annotations

from gpuhook.host.inventory import Inventory
from gpuhook.host.root import Root
from gpuhook.vendors.registry import kubernetes

DEFAULT_PATH = "/etc/kubernetes/node-feature-discovery/features.d/gpuhook"
ACCELERATOR = "gpuhook.feature.node.kubernetes.io/accelerator"
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
_DNS_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def labels(inventory: Inventory, root: Root, replicas: int, strategy: str = "none",
           sharing: str = "time-slicing") -> dict[str, str]:
    """The labels for this node, its GPUs shared `replicas` ways (time-slicing above 1) and its slices advertised
    by `strategy` ([kubernetes] mig_strategy); only valid ones."""
    out: dict[str, str] = {}
    for inv in inventory.vendors:
        key = f"gpuhook-{inv.vendor}"
        out[f"{key}.present"] = "true"
        out[f"{key}.count"] = str(len(inv.gpus))
        if inv.driver_version:
            out[f"{key}.driver"] = inv.driver_version
        part = kubernetes(inv.vendor)
        own = part.labels(inv, root, replicas, strategy, sharing if sharing in part.SHARING else "time-slicing")
        out.update({k if "/" in k else f"{key}.{k}": v for k, v in own.items()})
    present = inventory.with_gpus()
    if present:
        out[ACCELERATOR] = max(present, key=lambda v: len(v.gpus)).vendor  # max keeps the first of equals
        out.update({f"{ACCELERATOR}.{v.vendor}": "true" for v in present})
    return {k: v for k, v in out.items() if valid_key(k) and valid_value(v)}


def valid_value(value: str) -> bool:
    """Whether Kubernetes takes `value` as a label value: empty, or <= 63 of [A-Za-z0-9._-] with an
    alphanumeric at both ends."""
    return value == "" or _name(value)


def valid_key(key: str) -> bool:
    """Whether Kubernetes takes `key` as a label key: an optional DNS-subdomain prefix (<= 253) and '/', then a
    name as a non-empty value."""
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and all(_dns_label(p) for p in prefix.split("."))):
        return False
    return _name(name)


def render(values: dict[str, str]) -> str:
    """The feature file's text."""
    return "".join(f"{k}={v}\n" for k, v in sorted(values.items()))


def _name(text: str) -> bool:
    return 0 < len(text) <= 63 and set(text) <= _NAME_CHARS and text[0].isalnum() and text[-1].isalnum()


def _dns_label(text: str) -> bool:
    return 0 < len(text) <= 63 and set(text) <= _DNS_CHARS and text[0] != "-" and text[-1] != "-"
