"""amdsmi (the package), bound to a host root's own libamd_smi.so (so a simulated host carries its own).

amdsmi loads its library once, at import, from ROCM_PATH: a process that has imported it for one ROCm dir and
needs another (the warm helper imports it ahead for the host's; a call may name another host root) imports it
anew.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

_loaded_for: list[str] = []  # the ROCm dir the imported amdsmi bound


def load(rocm_dir: str) -> ModuleType:
    """amdsmi bound to `rocm_dir`/lib/libamd_smi.so. Changes ROCM_PATH (this process only); loads a library."""
    if _loaded_for and _loaded_for[0] != rocm_dir:
        for name in [m for m in sys.modules if m == "amdsmi" or m.startswith("amdsmi.")]:
            del sys.modules[name]
        _loaded_for.clear()
    os.environ["ROCM_PATH"] = rocm_dir  # where amdsmi looks for lib/libamd_smi.so
    import amdsmi

    _loaded_for[:] = [rocm_dir]
    module: ModuleType = amdsmi
    return module
