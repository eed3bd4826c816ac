"""Whether gpuhook's DRA driver serves this node, and under which name: state_dir/dra-driver, written by the
driver when it starts and removed when it stops. The runtime reads it only to refuse well: on such a node GPUs
come from claims (a ResourceClaim of the driver's DeviceClasses, or an extended resource those classes serve), and
its refusals name that way to ask rather than the device plugin's."""

from __future__ import annotations

import os

from gpuhook.apply.state_dir import ensure, unlink
from gpuhook.atomic import write_text
from gpuhook.statefile import read_bounded

FILE = "dra-driver"
_MAX = 256  # a driver name is a DNS subdomain of at most 63 characters


def mark(state_dir: str, driver: str) -> None:
    """Say that `driver` serves this node (state_dir/dra-driver). Writes a file."""
    write_text(os.path.join(ensure(state_dir), FILE), f"{driver}\n", mode=0o644)


def unmark(state_dir: str) -> None:
    """Say that no DRA driver of gpuhook's serves this node. Deletes a file."""
    unlink(os.path.join(state_dir, FILE))


def driver(state_dir: str) -> str:
    """The name of the DRA driver serving this node, "" when none does (or its file is not one). Reads a file."""
    try:
        return read_bounded(os.path.join(state_dir, FILE), _MAX).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
