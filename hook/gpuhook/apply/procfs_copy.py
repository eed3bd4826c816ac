"""Read-only copies of a vendor's procfs directory for containers (what the copy holds is the vendor's
decision: gpuhook.vendors.nvidia.procfs_files). Writes under state_dir.

Copies are content-addressed and shared: containers with the same GPUs on the same driver use one directory.
Each is built in a temporary directory and renamed into place whole.
"""

from __future__ import annotations

import os
import zlib

from gpuhook.atomic import write_text
from gpuhook.edits import ProcOverlay

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.plan.prepare import ProcfsCopy


def write(state_dir: str, copy: ProcfsCopy) -> ProcOverlay:
    """The overlay of the copy's directory (holding <name>/) over the container's own; written if new."""
    files = dict(copy.files)
    name = os.path.basename(copy.target)
    # crc32 names the copy (hashlib costs milliseconds on this path); a reused copy is compared in full, so a
    # collision can only cost a fresh directory, never another GPU's information
    digest = f"{zlib.crc32(repr(sorted(files.items())).encode()):08x}-{len(files)}"
    base = os.path.join(state_dir, f"{copy.vendor}-procfs")
    final = os.path.join(base, digest)
    if os.path.isdir(final):
        if _same(final, name, files):
            return ProcOverlay(final, copy.target)
        final = os.path.join(base, f"{digest}-{os.getpid()}")
    tmp = os.path.join(base, f".{digest}.{os.getpid()}")
    for rel, text in files.items():
        path = os.path.join(tmp, name, rel)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        write_text(path, text, mode=0o444)
    os.makedirs(os.path.join(tmp, name), mode=0o755, exist_ok=True)
    try:
        os.rename(tmp, final)
    except OSError:  # another container made the same copy first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return ProcOverlay(final, copy.target)


def _same(directory: str, name: str, files: dict[str, str]) -> bool:
    """Whether an existing copy holds exactly `files`."""
    top = os.path.join(directory, name)
    found = {os.path.relpath(os.path.join(d, f), top) for d, _, names in os.walk(top) for f in names}
    if found != set(files):
        return False
    for rel, text in files.items():
        with open(os.path.join(top, rel)) as f:
            if f.read() != text:
                return False
    return True
