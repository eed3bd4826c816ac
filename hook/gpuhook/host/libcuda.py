"""The host's libcuda, loaded from the host root's driver directory, asked which CUDA it supports.

cuDriverGetVersion needs no GPU and no cuInit. The library is the host driver's own file (never the
image's): loading it is what the CUDA runtime in the container will do against the same file.
"""

from __future__ import annotations

from gpuhook.errors import DiscoveryError


def driver_cuda_version(path: str) -> str:
    """'12.4' for a libcuda that reports 12040. Loads a shared library into this process."""
    import ctypes

    try:
        lib = ctypes.CDLL(path)
        version = ctypes.c_int(0)
        rc = lib.cuDriverGetVersion(ctypes.byref(version))
    except (OSError, AttributeError) as e:
        raise DiscoveryError(f"cannot ask {path} for its CUDA version: {e}") from e
    if rc != 0 or version.value <= 0:
        raise DiscoveryError(f"{path}: cuDriverGetVersion failed (CUresult {rc})")
    return cuda_string(version.value)


def cuda_string(version: int) -> str:
    """CUDA's integer version (12040) as text (12.4)."""
    return f"{version // 1000}.{version % 1000 // 10}"
