"""Read-only copies of the NVIDIA driver's procfs for containers. Writes under state_dir.

A container gets /proc/driver/nvidia with `params` (ModifyDeviceFiles: 0, so the driver libraries never try
to create device nodes), `version`, `registry` and the `gpus/<bdf>/information` of its own GPUs only. Copies
are content-addressed and shared: containers with the same GPUs on the same driver use one directory.
"""

from __future__ import annotations

import os
import zlib

from gpuhook.inventory import Gpu
from gpuhook.root import Root

TYPE_CHECKING = False  # typing and collections cost milliseconds to import: this runs before a container starts
if TYPE_CHECKING:
    from collections.abc import Sequence

_PROC = "/proc/driver/nvidia"


def nvidia_copy(host: Root, gpus: Sequence[Gpu], state_dir: str) -> str:
    """The directory (holding nvidia/) to mount over the container's /proc/driver/nvidia; created if new."""
    files: dict[str, str] = {}
    for name in ("params", "version", "registry"):
        if host.exists(f"{_PROC}/{name}"):
            files[name] = host.read_text(f"{_PROC}/{name}")
    if "params" in files:
        files["params"] = "".join(("ModifyDeviceFiles: 0\n" if line.startswith("ModifyDeviceFiles:") else line + "\n")
                                  for line in files["params"].splitlines())
    for gpu in gpus:
        info = f"{_PROC}/gpus/{gpu.pci}/information"
        if host.exists(info):
            files[f"gpus/{gpu.pci}/information"] = host.read_text(info)
    # crc32 names the copy (hashlib costs milliseconds on this path); a reused copy is compared in full, so a
    # collision can only cost a fresh directory, never another GPU's information
    digest = f"{zlib.crc32(repr(sorted(files.items())).encode()):08x}-{len(files)}"
    base = os.path.join(state_dir, "nvidia-procfs")
    final = os.path.join(base, digest)
    if os.path.isdir(final):
        if _same(final, files):
            return final
        final = os.path.join(base, f"{digest}-{os.getpid()}")
    tmp = os.path.join(base, f".{digest}.{os.getpid()}")
    for rel, text in files.items():
        path = os.path.join(tmp, "nvidia", rel)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o444)
    os.makedirs(os.path.join(tmp, "nvidia"), mode=0o755, exist_ok=True)
    try:
        os.rename(tmp, final)
    except OSError:  # another container made the same copy first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _same(directory: str, files: dict[str, str]) -> bool:
    """Whether an existing copy holds exactly `files`."""
    found = {os.path.relpath(os.path.join(d, f), os.path.join(directory, "nvidia"))
             for d, _, names in os.walk(os.path.join(directory, "nvidia")) for f in names}
    if found != set(files):
        return False
    for rel, text in files.items():
        with open(os.path.join(directory, "nvidia", rel)) as f:
            if f.read() != text:
                return False
    return True
