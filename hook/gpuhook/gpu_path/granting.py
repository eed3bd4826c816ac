"""Who grants the GPU path its GPUs: the kubelet's allocations ([policy] requests, plan/authority.py) and,
on a single host, count requests picking free GPUs under the count lock (plan/allocate.py). Loaded only when
a request presents an allocation, the policy is "allocated", or it asks for a count."""

from __future__ import annotations

from gpuhook.frozen import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpuhook.config import Config
    from gpuhook.host.inventory import Inventory
    from gpuhook.host.root import Root
    from gpuhook.plan.authority import PreparedClaim
    from gpuhook.request.container import Request


def authorized(request: Request, annotations: Mapping[str, str], config: Config, container_id: str,
               markers: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> Request:
    """The request as `[policy] requests` lets it through, its allocation claimed for this container, or its DRA
    claims (`markers`: request/dra_claim.claims_of) verified. Reads and writes the allocation record, reads the
    claims' records (and, to refuse, whether gpuhook's DRA driver serves the node); PolicyError."""
    from gpuhook.plan.authority import authorize

    claims = tuple((_verified_claim(config.state_dir, uid, requests, annotations), requests)
                   for uid, requests in markers)
    alloc = None
    if request.allocation:
        import time

        from gpuhook.apply import allocations
        from gpuhook.request.pod import workload_key

        alloc = allocations.claim(config.state_dir, request.allocation, workload_key(annotations, container_id),
                                  container_id, time.time())
    dra_driver = ""
    if (not claims and alloc is None and config.policy.requests == "allocated"
            and (request.selections or request.tuning.touches_host())):  # refused: say how to ask on this node
        from gpuhook.apply import dra_node

        dra_driver = dra_node.driver(config.state_dir)
    return authorize(request, alloc, config, claims, dra_driver)


def _verified_claim(state_dir: str, uid: str, requests: tuple[str, ...],
                    annotations: Mapping[str, str]) -> PreparedClaim:
    """The driver's record of claim `uid`, checked against what the container presents: prepared on this node,
    holding the requests named, in the container's own namespace (a ResourceClaim is its namespace's: a CDI
    device name taken to another namespace grants nothing). PolicyError otherwise."""
    from gpuhook.apply import claims
    from gpuhook.errors import PolicyError
    from gpuhook.request.pod import pod_identity

    claim = claims.load(state_dir, uid)
    if claim is None:
        raise PolicyError(f"DRA claim {uid} is not prepared on this node (it was unprepared, or its CDI device is "
                          "stale): GPUs come only from claims the kubelet prepared; recreate the pod")
    _, namespace, _ = pod_identity(annotations)
    if namespace != claim.namespace:
        raise PolicyError(f"DRA claim {claim.namespace}/{claim.name} is not this container's: it runs in namespace "
                          f"{namespace or '(none)'}; a claim serves the pods of its own namespace")
    missing = sorted(set(requests) - {d.request for d in claim.devices})
    if missing:
        raise PolicyError(f"DRA claim {claim.namespace}/{claim.name} has no request {', '.join(missing)} prepared "
                          f"here (it has {', '.join(sorted({d.request for d in claim.devices})) or 'none'})")
    return claim


def pick_free(request: Request, inventory: Inventory, root: Root, busy: tuple[tuple[str, str], ...],
              me: str, held: tuple[str, ...] | None = None) -> Request:
    """count:N selections as N GPUs none of `busy` (GPU, container) has, one NUMA node preferred; only among
    `held` when the container already holds GPUs (the shim picked them before its hook runs: picked again, a GPU
    freed since would be added to them). `busy` must be read under the lock held alone (a count's transaction,
    gpu_path/transaction.py; RuntimeError without it). Reads sysfs."""
    from gpuhook.apply.state_dir import holds_lock
    from gpuhook.host.numa import numa_node
    from gpuhook.plan.allocate import resolve_count
    from gpuhook.plan.select import vendor_for
    from gpuhook.vendors.registry import all_vendors

    if not holds_lock(exclusive=True):
        raise RuntimeError("count requests are picked under the lock held alone (Transaction(exclusive=True))")
    users = dict(busy)
    by_name = {v.NAME: v for v in all_vendors()}
    out = []
    for sel in request.selections:
        if sel.count:
            inv = vendor_for(sel, inventory, by_name)
            if held is not None:
                users.update({g.key(): me for g in inv.gpus if g.key() not in held and g.key() not in users})
            sel = resolve_count(sel, inv, by_name[inv.vendor].LABEL, users,
                                {g.pci: numa_node(root, g.pci) for g in inv.gpus})
            users.update(dict.fromkeys(sel.devices or (), me))
        out.append(sel)
    return replace(request, selections=tuple(out))
