"""What the GPU path's decision needs beyond the request and the inventory, gathered in one place.

All the I/O of a GPU container's start that is not discovery happens here, driven by a `Needs` the pure
planner computed: the image's ROCm and CUDA forward-compatibility files (read inside the image root, never
run), the CUDA version of the host's libcuda and GPUs' NVML facts (loaded only when a requirement names
them), the host's ROCm trees, the vendors' procfs texts, and leases. The result is a plain value.
"""

from __future__ import annotations

import os

from gpuhook.errors import DiscoveryError
from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, Protocol

    from gpuhook.config import Config, Policy
    from gpuhook.host.image import InRoot
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.rocm_trees import RocmTree
    from gpuhook.host.root import Root

    class ProcfsSource(Protocol):
        """What of a vendor gather asks for its procfs copies (the vendors' protocol has it)."""

        def procfs_files(self, root: Root, gpus: Sequence[Gpu],
                         policy: Policy) -> tuple[str, dict[str, str]] | None: ...

    class StackSource(Protocol):
        """What of a vendor gather asks for its user space in the image (the vendors' stack part has it)."""

        def image_stack(self, image: InRoot, notes: list[str]) -> str | None: ...


@frozen
class Needs:
    """Which facts the decision will look at (computed purely from the request and the selection)."""

    image: bool = False  # the image's ROCm version and compat libraries
    cuda: bool = False  # the CUDA version the host's NVIDIA driver supports
    nvml: tuple[str, ...] = ()  # GPU UUIDs whose compute capability and brand a requirement names
    rocm_trees: bool = False  # the host's ROCm trees (gpuhook.dev/host-rocm)
    procfs: tuple[tuple[str, tuple[Gpu, ...]], ...] = ()  # (vendor, its selected GPUs) for procfs copies
    stacks: tuple[tuple[str, StackSource], ...] = ()  # (vendor, its stack part) whose user space (Hygon's DTK) the
    # image's files say
    cuda_vendor: str = ""  # the vendor whose driver's CUDA and NVML facts `cuda` and `nvml` read (CUDA's stack)


@frozen
class HostFacts:
    """Facts gathered for one container; defaults are what a host without them gives."""

    root_path: str = ""  # the container's root filesystem
    dev_link: str | None = None  # the image's /dev is a symbolic link to this
    image_read: bool = False  # the image root was there to read
    image_notes: tuple[str, ...] = ()  # image files gpuhook refused to read (a FIFO, a device, too large)
    image_rocm: str | None = None
    image_stacks: tuple[tuple[str, str], ...] = ()  # (vendor, the release of its STACK the image ships)
    compat_dir: str = ""  # where the image's compat directory really is (inside the image), when it has one
    compat_versions: tuple[str, ...] = ()  # libcuda.so.<version> files in it
    host_cuda: str | None = None
    cuda_unknown: str = ""  # why the host's CUDA version is unknown, when it is
    nvml: tuple[tuple[str, str, str], ...] = ()  # (uuid, compute capability, brand)
    rocm_trees: tuple[RocmTree, ...] = ()
    procfs: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = ()  # (vendor, procfs dir, files)
    ledger: Any = None  # the tuning ledger as it is (read without its lock), live holders only; None: no ledger
    users: tuple[tuple[str, str], ...] = ()  # (GPU, container) of live GPU containers, when exclusivity is asked

    def gpu_facts(self, uuid: str) -> tuple[str, str]:
        """(compute capability, brand) NVML reported for the GPU."""
        return next((a, b) for u, a, b in self.nvml if u == uuid)


def gather(needs: Needs, root: Root, inventory: Sequence[VendorInventory], root_path: str, config: Config,
           ledger: Any = None, users: tuple[tuple[str, str], ...] = (),
           procfs_sources: Mapping[str, ProcfsSource] | None = None) -> HostFacts:
    """Read what `needs` names; the procfs files of the vendors `procfs_sources` has (by name). Reads the host and
    the image, loads libcuda/NVML only when needed."""
    dev = os.path.join(root_path, "dev")
    dev_link = os.readlink(dev) if os.path.islink(dev) else None
    image_rocm, compat_dir, image_read = None, "", False
    image_notes: tuple[str, ...] = ()
    compat_versions: tuple[str, ...] = ()
    stacks: list[tuple[str, str]] = []
    if needs.image and os.path.isdir(root_path):
        from gpuhook.host import image

        # reads only, so the O_NOFOLLOW walk (os alone) serves; openat2 would cost ctypes before every GPU container
        notes: list[str] = []
        with image.InRoot(root_path, use_openat2=False) as tree:
            image_rocm = image.rocm_version(tree, notes)
            compat_dir, compat_versions = image.compat_libcuda(tree)
            for vendor, source in needs.stacks:
                release = source.image_stack(tree, notes)
                if release:
                    stacks.append((vendor, release))
        image_read, image_notes = True, tuple(notes)
    nvidia = next((v for v in inventory if v.vendor == needs.cuda_vendor), None) if needs.cuda_vendor else None
    cuda, unknown = _host_cuda(nvidia, root) if needs.cuda and nvidia else (None, "")
    nvml = _nvml_facts(nvidia, root, needs.nvml) if needs.nvml and nvidia else ()
    trees: tuple[RocmTree, ...] = ()
    if needs.rocm_trees:
        from gpuhook.host.rocm_trees import discover_trees

        trees = discover_trees(root)
    procfs = []
    if needs.procfs:
        for vendor, gpus in needs.procfs:
            found = (procfs_sources or {})[vendor].procfs_files(root, gpus, config.policy)
            if found:
                procfs.append((vendor, found[0], tuple(sorted(found[1].items()))))
    return HostFacts(root_path=root_path, dev_link=dev_link, image_read=image_read, image_notes=image_notes,
                     image_rocm=image_rocm, image_stacks=tuple(stacks), compat_dir=compat_dir,
                     compat_versions=compat_versions, host_cuda=cuda, cuda_unknown=unknown, nvml=nvml, rocm_trees=trees,
                     procfs=tuple(procfs), ledger=ledger, users=users)


def _host_cuda(inv: VendorInventory, root: Root) -> tuple[str | None, str]:
    """The driver's CUDA version from its libcuda, else from NVML; (None, why) when neither says."""
    from gpuhook.host import libcuda

    try:
        return libcuda.driver_cuda_version(_driver_file(inv, root, "libcuda.so.")), ""
    except DiscoveryError as first:
        try:
            from gpuhook.host import nvml

            with nvml.session(_driver_file(inv, root, "libnvidia-ml.so.")) as lib:
                return nvml.cuda_version(lib), ""
        except DiscoveryError:
            return None, str(first)


def _nvml_facts(inv: VendorInventory, root: Root, uuids: tuple[str, ...]) -> tuple[tuple[str, str, str], ...]:
    from gpuhook.host import nvml

    with nvml.session(_driver_file(inv, root, "libnvidia-ml.so.")) as lib:
        return tuple((u, *nvml.device_facts(lib, u)) for u in uuids)


def _driver_file(inv: VendorInventory, root: Root, prefix: str) -> str:
    for f in inv.files:
        if os.path.basename(f.source).startswith(prefix):
            return root.lexical(f.source)
    raise DiscoveryError(f"the host driver has no {prefix}* library under {root.base}")
