"""gpuhook.dev/host-rocm: the host's ROCm user space, read-only, instead of the image's.

The host keeps /opt/rocm-<version> trees (several side by side is normal) and /opt/rocm. The tree mounted
is the one named in the request, else the newest one the host's amdgpu driver supports (AMD's support
matrix), else where the host's /opt/rocm points. Pure: the trees come from gpuhook.host.rocm_trees.
"""

from __future__ import annotations

from gpuhook.edits import Edits, Mount
from gpuhook.errors import PlanError, PolicyError
from gpuhook.host import rocm
from gpuhook.host.rocm_trees import RocmTree
from gpuhook.request.container import HostRocm

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

DIR_OPTIONS = ("rbind", "ro", "nosuid", "nodev")


def choose(trees: tuple[RocmTree, ...], asked: HostRocm, driver: str | None) -> RocmTree:
    """The tree to mount; PlanError names what the host has when nothing fits."""
    have = ", ".join(t.version for t in trees) or "none"
    if not trees:
        raise PlanError("gpuhook.dev/host-rocm asks for the host's ROCm but the host has no /opt/rocm-<version> "
                        "tree: install ROCm on the host or use an image that ships it")
    if asked.version:
        named = [t for t in trees if t.version == asked.version or t.version.startswith(asked.version + ".")]
        if not named:
            raise PlanError(f"gpuhook.dev/host-rocm={asked.version} but the host has ROCm {have}")
        return named[-1]
    release = rocm.release_of_driver(driver) if driver else None
    if release and rocm.window(release):
        fits = [t for t in trees if rocm.supported(t.version, release)]
        if not fits:
            lo, hi = rocm.window(release) or ("?", "?")
            raise PlanError(f"the host amdgpu driver {driver} (ROCm {release}) supports ROCm {lo} to {hi} but "
                            f"the host's ROCm trees are {have}: name one with gpuhook.dev/host-rocm=<version>")
        return fits[-1]
    defaults = [t for t in trees if t.default]
    return defaults[0] if defaults else trees[-1]


def plan(tree: RocmTree, host_base: str, env: Mapping[str, str]) -> Edits:
    """Read-only mounts of the tree at its own path and at /opt/rocm, its libraries in the linker cache,
    ROCM_PATH and PATH. Pure."""
    source = tree.path if host_base == "/" else host_base.rstrip("/") + tree.path
    path = env.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return Edits(
        mounts=(Mount(source, tree.path, DIR_OPTIONS), Mount(source, "/opt/rocm", DIR_OPTIONS)),
        env=(f"ROCM_PATH={tree.path}", f"PATH={tree.path}/bin:{path}"),
        ldcache_dirs=tree.lib_dirs,
    )


def check_image(image_version: str | None, tree: RocmTree, asked: HostRocm) -> None:
    """Refuse two different ROCm user spaces in one container unless the request says the host's wins."""
    if image_version and image_version != tree.version and not asked.override:
        raise PolicyError(f"the image ships ROCm {image_version} in /opt/rocm and gpuhook.dev/host-rocm would "
                          f"mount the host's ROCm {tree.version} over it (two user spaces in one process): use a "
                          "slim image without /opt/rocm, or say the host's wins with "
                          f"gpuhook.dev/host-rocm={tree.version},override")
