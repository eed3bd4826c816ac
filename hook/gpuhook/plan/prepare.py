"""The GPU path's one decision: (request, inventory, facts, policy) -> Prepared. Pure: no I/O.

`survey` says which facts the decision will look at (so that gathering reads nothing more), `decide` makes
it: the GPUs, the checks against the image and the host, host ROCm, hardening, tuning, and the edits. Both
raise the errors a user sees (RequestError, PlanError, PolicyError, ConfigError) in the same order.
"""

from __future__ import annotations

from gpuhook.edits import SHARED_MEMORY, Edits, Hook, merge
from gpuhook.errors import PolicyError, RequestError
from gpuhook.frozen import frozen
from gpuhook.host.facts import Needs
from gpuhook.plan.select import Selected, edits_for, select_all
from gpuhook.plan.shared_gpu import check, own_mps
from gpuhook.plan.tuning import check_conflicts, check_leases, check_policy, gpus_in_spec, settings_for
from gpuhook.request.container import HostRocm, Request, env_map
from gpuhook.vendors.contract import CUDA, ROCM, Setting
from gpuhook.vendors.registry import get, stack
from gpuhook.vendors.registry import tuning as tuning_part

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from gpuhook.config import Config
    from gpuhook.host.facts import HostFacts
    from gpuhook.host.inventory import Inventory

    Spec = dict[str, Any]


@frozen
class ProcfsCopy:
    """A read-only copy of a vendor's procfs directory to put over the container's own."""

    vendor: str
    target: str  # e.g. /proc/driver/nvidia
    files: tuple[tuple[str, str], ...]  # (path under the directory, text)


@frozen
class Prepared:
    """A GPU container's edits, the warnings for its user, and what the hooks and records need."""

    edits: Edits
    warnings: tuple[str, ...]
    drivers: tuple[tuple[str, str], ...] = ()  # (vendor, driver version whose user space it gets)
    settings: tuple[Setting, ...] = ()  # host tuning for the prestart hook to apply
    exclusive: tuple[str, ...] = ()  # GPUs to lease
    gpus: tuple[str, ...] = ()  # every GPU the container gets (Gpu.key), and the physical GPUs of its slices
    procfs: tuple[ProcfsCopy, ...] = ()  # copies to write; their overlays join `edits` once written
    host_rocm: str | None = None  # the version of the host ROCm tree it gets
    directories: tuple[str, ...] = ()  # host directories a sharing daemon's mounts need (an MPS daemon's pipes),
    # made by the runtime before the container's mounts (the daemon starts at prestart, after them)
    shared_memory: tuple[str, ...] = ()  # and the tmpfs of its shared memory, its /dev/shm (statefile.SHARED) in it


def asks(request: Request) -> bool:
    """Whether the container asks gpuhook for anything; RequestError for host ROCm without GPUs."""
    tuning = request.tuning
    if not request.wants_gpus and not tuning.touches_host() and not tuning.env:
        if request.host_rocm_asked and request.host_rocm:
            raise RequestError("gpuhook.dev/host-rocm needs AMD GPUs: add gpuhook.dev/gpus")
        return False
    return True


def vendors_to_discover(request: Request) -> frozenset[str] | None:
    """The vendors the request names when every selection names one (only they need discovering), else None; a
    --gpus selection another vendor may serve ([policy] gpus_any_vendor) names none."""
    named = frozenset("" if s.any_vendor or not s.vendor else s.vendor for s in request.selections)
    return named if request.wants_gpus and "" not in named else None


def survey(request: Request, inventory: Inventory, spec: Spec, config: Config) -> Needs:
    """The facts `decide` will need, after the checks that need none of them."""
    selected = _selected(request, inventory, spec, config)
    by_vendor = {inv.vendor: gpus for inv, gpus in selected}
    env = _env(spec)
    annotations = spec.get("annotations") or {}
    checks = _checks_needed(by_vendor, env, annotations)
    cuda, cuda_vendor = False, ""
    nvml: tuple[str, ...] = ()
    if checks:
        from gpuhook.plan import compat

        cuda, nvml = compat.needs(selected, env, annotations)
        cuda_vendor = compat.cuda_vendor(selected) if cuda or nvml else ""
    rocm_trees = checks and _host_rocm_wanted(request, config, by_vendor) is not None
    return Needs(image=checks, cuda=cuda, nvml=nvml, rocm_trees=rocm_trees,
                 procfs=tuple((inv.vendor, gpus) for inv, gpus in selected),
                 stacks=tuple((v, stack(v)) for v in by_vendor if stack(v).IMAGE) if checks else (),
                 cuda_vendor=cuda_vendor)


def decide(request: Request, inventory: Inventory, facts: HostFacts, spec: Spec, config: Config,
           gpuhook_bin: str, hook_env: tuple[str, ...] = ()) -> Prepared:
    """The edits and tuning that give the container what it asked for, or the error that says why not.
    `hook_env`: more environment for the tuning hooks (the warm helper's socket, when the shim was told one)."""
    tuning = request.tuning
    selected = _selected(request, inventory, spec, config)
    by_vendor = {inv.vendor: (inv, gpus) for inv, gpus in selected}
    settings = settings_for(tuning, selected, config.tuning.shared_slices)
    shared = [tuning_part(inv.vendor).sharing(tuning, gpus, config.tuning.mps_dir) for inv, gpus in selected] \
        if tuning.mps else []
    settings += tuple(s for made, _ in shared for s in made)
    gpu_names = tuple(g.key() for _, gpus in selected for g in gpus)
    # a slice's container uses its physical GPU too: a lease on the GPU holds against it, and it counts as a user
    # of the GPU for another container's lease
    used = tuple(dict.fromkeys((*gpu_names, *(g.parent for _, gpus in selected for g in gpus if g.parent))))
    ledger = facts.ledger or {"leases": {}, "settings": {}}
    check_leases(ledger["leases"], used)  # a lease holds against every container that would get the GPU
    if settings or tuning.exclusive:  # the prestart hook checks again under the ledger's lock: the authority
        check_conflicts(ledger, settings, gpu_names if tuning.exclusive else (), lambda h: False,
                        lambda gpu: [c for g, c in facts.users if g == gpu])
    if facts.dev_link is not None:
        raise PolicyError(f"the image's /dev is a symbolic link (to {facts.dev_link!r}): runc follows it out of "
                          "the container when it sets up /dev, so gpuhook refuses to start this GPU container")
    env, annotations = _env(spec), spec.get("annotations") or {}
    rocm_edits, verdict_edits, tree_version = Edits(), Edits(), None
    warnings: tuple[str, ...] = ()
    if _checks_needed(by_vendor, env, annotations) or request.host_rocm is not None:  # host-rocm refused here
        from gpuhook.plan import compat

        rocm_edits, tree_version = _host_rocm(request, config, by_vendor, facts, env, inventory.root)
        verdict = compat.check(selected, env, annotations, facts, config.policy.rocm_compatibility, tree_version)
        verdict_edits, warnings = verdict.edits, (*facts.image_notes, *verdict.warnings)
    injected = edits_for(selected, request, inventory) if request.wants_gpus else Edits()
    hardening = merge([get(v).hardening(config.policy) for v in by_vendor])
    edits = merge([verdict_edits, injected, rocm_edits, hardening, *(e for _, e in shared),
                   Edits(readonly_mounts=("/sys",) if config.policy.readonly_sys else ()), Edits(env=tuning.env),
                   _tuning_hooks(config, gpuhook_bin, hook_env) if tuning.touches_host() else Edits()])
    drivers = tuple((v, inv.driver_version or "") for v, (inv, _) in by_vendor.items())
    procfs = tuple(ProcfsCopy(v, target, files) for v, target, files in facts.procfs if v in by_vendor)
    return Prepared(edits=edits, warnings=warnings, drivers=drivers, settings=settings,
                    exclusive=gpu_names if tuning.exclusive else (), gpus=used, procfs=procfs,
                    host_rocm=tree_version,
                    directories=tuple(m.host_path for _, e in shared for m in e.mounts
                                      if m.container_path != SHARED_MEMORY),
                    shared_memory=tuple(m.host_path.rsplit("/", 1)[0] for _, e in shared for m in e.mounts
                                        if m.container_path == SHARED_MEMORY))


def _selected(request: Request, inventory: Inventory, spec: Spec, config: Config) -> Selected:
    """The checks before any fact: tuning policy and what an MPS client may ask, the GPUs, AMD-only runtime
    settings, tuning per vendor."""
    tuning = request.tuning
    check_policy(tuning, config.tuning)
    mps = own_mps(tuning)  # an MPS client shares its GPU whatever granted it (plan/shared_gpu.py)
    if mps is not None:
        check(tuning, mps)
    if request.wants_gpus:
        selected = select_all(request, inventory)
    else:  # tuning for the GPUs a device plugin (or --device) already put in the spec
        selected = gpus_in_spec(((spec.get("linux") or {}).get("devices") or []), inventory)
        if not selected:
            raise RequestError("the gpuhook.dev/ tuning annotations need GPUs: add gpuhook.dev/gpus, or give the "
                               "container GPU device nodes (a device plugin, --device)")
    vendors = [inv.vendor for inv, _ in selected]
    if tuning.env and _rocm_vendor(vendors) is None:
        raise RequestError("gpuhook.dev/fine-grain-pcie and gpuhook.dev/gfx-override are AMD runtime settings, "
                           "but this container's GPUs are " + ", ".join(dict.fromkeys(vendors)))
    settings_for(tuning, selected, config.tuning.shared_slices)
    return selected


def _env(spec: Spec) -> dict[str, str]:
    return env_map((spec.get("process") or {}).get("env") or [])


def _checks_needed(by_vendor: dict[str, Any], env: dict[str, str], annotations: dict[str, str]) -> bool:
    """Whether compatibility checks or host ROCm apply: GPUs whose user space is not CUDA (ROCm, DTK: the image's
    files say its release), or a stated requirement (CUDA's way). Reads the vendors' STACK, not their stack parts."""
    return ("gpuhook.dev/require" in annotations or "CUDA_VERSION" in env
            or any(k.startswith("NVIDIA_REQUIRE_") for k in env)
            or any(get(v).STACK not in ("", CUDA) for v in by_vendor))


def _rocm_vendor(vendors: Iterable[str]) -> str | None:
    """The vendor among `vendors` whose stack is ROCm (host ROCm, HSA's settings and ROCm's check are its), if any."""
    return next((v for v in vendors if get(v).STACK == ROCM), None)


def _host_rocm_wanted(request: Request, config: Config, by_vendor: dict[str, Any]) -> HostRocm | None:
    """What the container asks of the host's ROCm, or the policy default for AMD containers."""
    want = request.host_rocm
    if want is None and not request.host_rocm_asked and config.policy.host_rocm and _rocm_vendor(by_vendor):
        want = HostRocm()
    return want


def _host_rocm(request: Request, config: Config, by_vendor: dict[str, Any], facts: HostFacts,
               env: dict[str, str], host_base: str) -> tuple[Edits, str | None]:
    """The host-ROCm edits (and the tree's version) when asked, or by policy for AMD containers."""
    want = _host_rocm_wanted(request, config, by_vendor)
    if want is None:
        return Edits(), None
    rocm_vendor = _rocm_vendor(by_vendor)
    if rocm_vendor is None:
        raise RequestError("gpuhook.dev/host-rocm mounts the host's ROCm for AMD GPUs, but this container's GPUs "
                           "are " + ", ".join(by_vendor))
    from gpuhook.plan import host_rocm

    tree = host_rocm.choose(facts.rocm_trees, want, by_vendor[rocm_vendor][0].driver_version)
    host_rocm.check_image(facts.image_rocm if facts.image_read else None, tree, want)
    return host_rocm.plan(tree, host_base, env), tree.version


def _tuning_hooks(config: Config, gpuhook_bin: str, hook_env: tuple[str, ...]) -> Edits:
    """The prestart hook that applies tuning and the poststop hook that restores it (shim mode)."""
    env = (f"GPUHOOK_CONFIG={config.path}", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", *hook_env)
    return Edits(hooks=(Hook(stage="prestart", path=gpuhook_bin, args=("gpuhook", "hook", "prestart"), env=env,
                             timeout=config.hook_timeout),
                        Hook(stage="poststop", path=gpuhook_bin, args=("gpuhook", "hook", "poststop"), env=env,
                             timeout=config.hook_timeout)))
