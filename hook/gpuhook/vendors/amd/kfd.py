"""The KFD topology's properties files (/sys/class/kfd/kfd/topology/nodes/<n>/...), as AMD's discovery and its
node labels read them."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.root import Root


def kfd_properties(root: Root, path: str) -> dict[str, int]:
    """A KFD properties file's `name value` lines, the integer ones ({} when it cannot be read)."""
    out: dict[str, int] = {}
    try:
        text = root.read_text(path)
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        try:
            out[key] = int(value.strip())
        except ValueError:
            continue
    return out
