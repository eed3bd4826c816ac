"""Read device nodes of the host (under a Root) into DeviceNode values."""

from __future__ import annotations

import os
import stat

from gpuhook.edits import DeviceNode
from gpuhook.host.root import Root


def read_node(root: Root, path: str) -> DeviceNode | None:
    """The device node at host path `path` (type, numbers, mode, owner from the node itself), or None."""
    try:
        st = os.stat(root.resolve(path))
    except OSError:
        return None
    if stat.S_ISCHR(st.st_mode):
        kind = "c"
    elif stat.S_ISBLK(st.st_mode):
        kind = "b"
    else:
        return None
    return DeviceNode(path=path, kind=kind, major=os.major(st.st_rdev), minor=os.minor(st.st_rdev),
                      mode=stat.S_IMODE(st.st_mode), uid=st.st_uid, gid=st.st_gid)
