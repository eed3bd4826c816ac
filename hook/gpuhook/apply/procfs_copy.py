"""Read-only copies of a vendor's procfs directory for containers (what the copy holds is the vendor's
decision: gpuhook.vendors.nvidia.procfs_files). Writes under state_dir.

Copies are content-addressed and shared: containers with the same GPUs on the same driver use one directory.
Each is built in a temporary directory and renamed into place whole.
"""

from __future__ import annotations

import os
import zlib

from gpuhook.apply.state_dir import ensure
from gpuhook.atomic import write_text
from gpuhook.edits import ProcOverlay
from gpuhook.statefile import read_bounded

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.plan.prepare import ProcfsCopy

CONTENT = ".content"  # <copy>.content: the copy's files as written, for reuse checks (one read, not a walk)


def write(state_dir: str, copy: ProcfsCopy) -> ProcOverlay:
    """The overlay of the copy's directory (holding <name>/) over the container's own; written if new."""
    files = dict(copy.files)
    name = os.path.basename(copy.target)
    # crc32 names the copy (hashlib costs milliseconds on this path); a reused copy's whole content is compared
    # (its CONTENT file, written with it), so a collision can only cost a fresh directory, never another GPU's
    # information
    content = repr(sorted(files.items()))
    digest = f"{zlib.crc32(content.encode()):08x}-{len(files)}"
    base = os.path.join(ensure(state_dir), f"{copy.vendor}-procfs")
    final = os.path.join(base, digest)
    if os.path.isdir(final):
        if _same(final, content) or _same_files(final, name, files, content):
            return ProcOverlay(final, copy.target)
        final = os.path.join(base, f"{digest}-{os.getpid()}")
    tmp = os.path.join(base, f".{digest}.{os.getpid()}")
    for rel, text in files.items():
        path = os.path.join(tmp, name, rel)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        write_text(path, text, mode=0o444, durable=False)  # rebuilt from the host whenever it does not match
    os.makedirs(os.path.join(tmp, name), mode=0o755, exist_ok=True)
    write_text(final + CONTENT, content, mode=0o444, durable=False)  # beside the copy, never in what is mounted
    try:
        os.rename(tmp, final)
    except OSError:  # another container made the same copy first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return ProcOverlay(final, copy.target)


def _same_files(directory: str, name: str, files: dict[str, str], content: str) -> bool:
    """A copy made before content files: compared file by file, and given its content file when it matches."""
    if os.path.exists(directory + CONTENT):
        return False
    top = os.path.join(directory, name)
    found = {os.path.relpath(os.path.join(d, f), top) for d, _, names in os.walk(top) for f in names}
    if found != set(files):
        return False
    for rel, text in files.items():
        if read_bounded(os.path.join(top, rel), len(text.encode()) + 1) != text.encode():
            return False
    write_text(directory + CONTENT, content, mode=0o444, durable=False)
    return True


def _same(directory: str, content: str) -> bool:
    """Whether an existing copy was written with exactly this content."""
    try:
        return read_bounded(directory + CONTENT, len(content.encode()) + 1) == content.encode()
    except OSError:
        return False
