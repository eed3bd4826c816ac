"""NVML through pynvml, bound to the host root's own libnvidia-ml.so.1 (so a simulated host carries its own)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gpuhook.errors import DiscoveryError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any


@contextmanager
def session(library: str) -> Iterator[ModuleType]:
    """pynvml, initialised against `library`; shut down on exit. Loads a shared library."""
    import ctypes

    import pynvml

    try:
        if getattr(pynvml.nvmlLib, "_name", None) != library:
            # pynvml binds one library per process and caches its symbols: rebind both to this host's
            pynvml.nvmlLib = ctypes.CDLL(library)
            pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml.nvmlInit()
    except (OSError, pynvml.NVMLError) as e:
        raise DiscoveryError(f"NVML ({library}) cannot start: {e}") from e
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def brand_name(pynvml: ModuleType, brand: int) -> str:
    """NVML's brand number as the NVIDIA_REQUIRE_* grammar names it (tesla, geforce, nvidiartx, ...)."""
    for name in dir(pynvml):
        if name.startswith("NVML_BRAND_") and name != "NVML_BRAND_COUNT" and getattr(pynvml, name) == brand:
            word = name[len("NVML_BRAND_"):].lower()
            if word.startswith("nvidia_") and word != "nvidia_rtx":
                word = word[len("nvidia_"):]
            return word.replace("_", "")
    return "unknown"


def device_facts(pynvml: ModuleType, uuid: str) -> tuple[str, str]:
    """(compute capability 'major.minor', brand name) of the GPU with this UUID."""
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        brand = pynvml.nvmlDeviceGetBrand(handle)
    except pynvml.NVMLError as e:
        raise DiscoveryError(f"NVML cannot describe GPU {uuid}: {e}") from e
    return f"{major}.{minor}", brand_name(pynvml, brand)


def cuda_version(pynvml: ModuleType) -> str:
    """The CUDA version the driver supports, as NVML reports it."""
    from gpuhook.host.libcuda import cuda_string

    try:
        return cuda_string(pynvml.nvmlSystemGetCudaDriverVersion())
    except pynvml.NVMLError as e:
        raise DiscoveryError(f"NVML cannot report the CUDA version: {e}") from e


def mig_devices(pynvml: ModuleType, uuid: str) -> dict[tuple[str, int, int], tuple[str, str, int]]:
    """{(GPU UUID, GI, CI): (MIG UUID, profile, memory MiB)} of the GPU's MIG devices; {} when MIG is off or
    unsupported."""
    parent = _mig_parent(pynvml, uuid)
    if parent is None:
        return {}
    handle, most = parent
    out: dict[tuple[str, int, int], tuple[str, str, int]] = {}
    for i in range(most):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
        except pynvml.NVMLError:
            continue  # an index with no MIG device
        try:
            attrs = pynvml.nvmlDeviceGetAttributes(mig)
            key = (uuid, pynvml.nvmlDeviceGetGpuInstanceId(mig), pynvml.nvmlDeviceGetComputeInstanceId(mig))
            out[key] = (_text(pynvml.nvmlDeviceGetUUID(mig)), profile_name(
                attrs.gpuInstanceSliceCount, attrs.computeInstanceSliceCount, attrs.memorySizeMB), attrs.memorySizeMB)
        except pynvml.NVMLError as e:
            raise DiscoveryError(f"NVML cannot describe MIG device {i} of GPU {uuid}: {e}") from e
    return out


def _mig_parent(pynvml: ModuleType, uuid: str) -> tuple[Any, int] | None:
    """The GPU's handle and how many MIG devices it may hold; None when MIG is off or unsupported."""
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        if pynvml.nvmlDeviceGetMigMode(handle)[0] != 1:
            return None
        return handle, int(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle))
    except pynvml.NVMLError:
        return None


def profile_name(gi_slices: int, ci_slices: int, memory_mib: int) -> str:
    """A MIG profile as NVIDIA names it: 1g.10gb, or 1c.2g.20gb for a compute instance smaller than its GI."""
    gb = (memory_mib + 1023) // 1024
    return f"{gi_slices}g.{gb}gb" if ci_slices == gi_slices else f"{ci_slices}c.{gi_slices}g.{gb}gb"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def addressing_mode(pynvml: ModuleType, uuid: str) -> str:
    """The GPU's memory addressing mode as NVIDIA's tools spell it (ATS, HMM, None: supported but off); "" where
    NVML cannot say (a driver without the call, a platform without coherent memory)."""
    try:
        mode = pynvml.nvmlDeviceGetAddressingMode(pynvml.nvmlDeviceGetHandleByUUID(uuid))
    except (pynvml.NVMLError, AttributeError):  # AttributeError: a library without the symbol
        return ""
    return {pynvml.NVML_DEVICE_ADDRESSING_MODE_NONE: "None", pynvml.NVML_DEVICE_ADDRESSING_MODE_HMM: "HMM",
            pynvml.NVML_DEVICE_ADDRESSING_MODE_ATS: "ATS"}.get(mode, "")


def mig_resources(pynvml: ModuleType, uuid: str) -> dict[tuple[str, int, int], dict[str, int]]:
    """{(GPU UUID, GI, CI): {NVML's name: count}} of the GPU's MIG devices: what each has of the GPU
    (multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount,
    sharedOfaCount, memorySizeMB) and, where NVML tells its GPU instance's placement, placementStart and
    placementSize in memory slices; {} when MIG is off or unsupported."""
    names = ("multiprocessorCount", "sharedCopyEngineCount", "sharedDecoderCount", "sharedEncoderCount",
             "sharedJpegCount", "sharedOfaCount", "memorySizeMB")
    parent = _mig_parent(pynvml, uuid)
    if parent is None:
        return {}
    handle, most = parent
    out: dict[tuple[str, int, int], dict[str, int]] = {}
    for i in range(most):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
            attrs = pynvml.nvmlDeviceGetAttributes(mig)
            gi, ci = pynvml.nvmlDeviceGetGpuInstanceId(mig), pynvml.nvmlDeviceGetComputeInstanceId(mig)
        except pynvml.NVMLError:
            continue  # an index with no MIG device, or one NVML cannot describe: published without these
        facts = {name: int(getattr(attrs, name)) for name in names}
        try:
            placement = pynvml.nvmlGpuInstanceGetInfo(pynvml.nvmlDeviceGetGpuInstanceById(handle, gi)).placement
            facts.update(placementStart=int(placement.start), placementSize=int(placement.size))
        except (pynvml.NVMLError, AttributeError):
            pass  # a driver that does not tell where the instance sits: no memory slices published
        out[(uuid, gi, ci)] = facts
    return out
