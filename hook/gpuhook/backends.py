"""The tuning backend of each vendor, made on first use and closed at the end. Imported only for tuning."""

from __future__ import annotations

import os

from gpuhook.errors import GpuhookError
from gpuhook.tune import Backend, TuningError

TYPE_CHECKING = False  # typing costs ~5 ms to import, paid by both tuning hooks of every tuned container
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.inventory import Inventory
    from gpuhook.root import Root


class BackendSet:
    """Callable vendor -> Backend, for tune.acquire/release/sweep; use as a context manager."""

    def __init__(self, root: Root, inventory: Inventory | None = None) -> None:
        self._root = root
        self._inventory = inventory  # None: discover a vendor when its backend is first needed
        self._made: dict[str, Any] = {}

    def __call__(self, vendor: str) -> Backend:
        if vendor not in self._made:
            self._made[vendor] = self._make(vendor)
        backend: Backend = self._made[vendor]
        return backend

    def __enter__(self) -> BackendSet:
        return self

    def __exit__(self, *_: object) -> None:
        for b in self._made.values():
            b.close()

    def _make(self, vendor: str) -> Any:
        if vendor == "nvidia":
            from gpuhook.tune_nvidia import NvmlBackend

            if self._inventory is None:
                from gpuhook.discover import discover

                self._inventory = discover(self._root, frozenset({"nvidia"}))
            inv = self._inventory.vendor("nvidia")
            files = inv.files if inv else ()
            lib = next((f.source for f in files if os.path.basename(f.source).startswith("libnvidia-ml.so.")), None)
            if lib is None:
                raise TuningError(f"no libnvidia-ml under {self._root.base}: NVIDIA tuning needs the driver's NVML")
            try:
                return NvmlBackend(self._root.lexical(lib))
            except GpuhookError as e:
                raise TuningError(str(e)) from e
        from gpuhook.tune_amd import AmdSmiBackend, SysfsBackend

        rocm = self._root.resolve("/opt/rocm")
        if os.path.exists(os.path.join(rocm, "lib/libamd_smi.so")):
            try:
                return AmdSmiBackend(rocm)
            except (TuningError, ImportError, OSError, AttributeError, KeyError):
                pass  # an amdsmi package that does not fit the host's library: the kernel's files still work
        return SysfsBackend(self._root)
