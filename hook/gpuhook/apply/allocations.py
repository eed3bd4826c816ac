"""Allocation records: what the kubelet gave a container, written by gpuhook's device plugin at Allocate and
verified by the runtime at create. One file per allocation, state_dir/allocations/<id>.json; the id is a
random 128-bit name the kubelet passes to the container as gpuhook.dev/allocation.

A record is claimed by the first container that presents it, for its pod and container name: a restart of that
container (same pod, same name) may present it again; any other container is refused. An unclaimed record
expires; a claimed record the kubelet superseded (it allocated the same devices anew, so the container that
claimed it is gone) is removed by the plugin.
"""

from __future__ import annotations

import os

from gpuhook import fastjson
from gpuhook.apply.state_dir import ensure, records, unlink
from gpuhook.atomic import write_text
from gpuhook.errors import PolicyError
from gpuhook.frozen import replace
from gpuhook.plan.authority import Allocation
from gpuhook.statefile import read_bounded

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

DIR = "allocations"
_MAX_RECORD = 1 << 16


def directory(state_dir: str) -> str:
    """state_dir/allocations, made (0700) where missing."""
    path = os.path.join(ensure(state_dir), DIR)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def save(state_dir: str, alloc: Allocation) -> None:
    """Write an allocation's record (atomically, 0600). Writes a file."""
    write_text(os.path.join(directory(state_dir), f"{alloc.id}.json"), _dump(alloc), mode=0o600)


def load(state_dir: str, alloc_id: str) -> Allocation | None:
    """The record `alloc_id` (32 hex digits, checked by the request parser), or None. Reads a file."""
    return _read(os.path.join(directory(state_dir), f"{os.path.basename(alloc_id)}.json"))


def all_records(state_dir: str) -> list[Allocation]:
    """Every readable record. Reads files."""
    return records(directory(state_dir), _read)


def remove(state_dir: str, alloc_id: str) -> None:
    """Delete a record. Deletes a file."""
    unlink(os.path.join(directory(state_dir), f"{os.path.basename(alloc_id)}.json"))


def supersede(state_dir: str, devices: Iterable[str], keep: str = "") -> list[str]:
    """Remove the claimed records (but `keep`) that hold any of `devices`: the kubelet allocated them anew, so the
    containers that claimed them are gone, and none of them may present its record again. An unclaimed record
    stays until it expires: at a pod's admission the kubelet allocates the same devices to its init container and
    then to its app container, before either runs (devices of init containers are reused), and both must start;
    an unclaimed record of a pod that never started serves nobody (only that pod's containers know its id).
    Returns the removed ids. Reads and deletes files."""
    wanted = set(devices)
    gone = [r.id for r in all_records(state_dir)
            if r.id != keep and r.claimed_by and wanted.intersection(r.devices)]
    for alloc_id in gone:
        remove(state_dir, alloc_id)
    return gone


def expire(state_dir: str, now: float) -> list[str]:
    """Remove unclaimed records past their deadline. Returns their ids. Reads and deletes files."""
    gone = [r.id for r in all_records(state_dir) if not r.claimed_by and r.expires < now]
    for alloc_id in gone:
        remove(state_dir, alloc_id)
    return gone


def claim(state_dir: str, alloc_id: str, claimer: str, container_id: str, now: float) -> Allocation:
    """The record `alloc_id`, claimed for `claimer` ("<pod>/<container name>") under a lock; PolicyError when it
    does not exist, expired unclaimed, or belongs to another container. Reads and writes a file."""
    import fcntl

    fd = os.open(os.path.join(directory(state_dir), ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        alloc = load(state_dir, alloc_id)
        check(alloc, alloc_id, claimer, now)
        assert alloc is not None  # check() refused otherwise
        claimed = replace(alloc, claimed_by=claimer, container=container_id)
        if claimed != alloc:
            save(state_dir, claimed)
        return claimed
    finally:
        os.close(fd)


def check(alloc: Allocation | None, alloc_id: str, claimer: str, now: float) -> None:
    """PolicyError unless `claimer` may use the allocation. Pure."""
    key = "gpuhook.dev/allocation"
    if alloc is None:
        raise PolicyError(f"{key}={alloc_id}: no such allocation on this node (it was superseded, or is from "
                          "another node): GPUs come only from the kubelet; recreate the pod")
    if alloc.claimed_by and alloc.claimed_by != claimer:
        raise PolicyError(f"{key}={alloc_id}: this allocation ({alloc.resource}: {', '.join(alloc.gpus)}) belongs "
                          f"to container {alloc.claimed_by}, not {claimer}: an allocation is one container's; "
                          "ask for your own with resources.limits")
    if not alloc.claimed_by and alloc.expires < now:
        raise PolicyError(f"{key}={alloc_id}: the allocation expired {int(now - alloc.expires)} s ago unused "
                          "(raise [kubernetes] allocation_ttl if images take this long to pull); recreate the pod")


def _dump(a: Allocation) -> str:
    return fastjson.dumps({"id": a.id, "resource": a.resource, "vendor": a.vendor, "gpus": list(a.gpus),
                           "devices": list(a.devices), "shared": a.shared, "created": a.created,
                           "expires": a.expires, "claimed_by": a.claimed_by, "container": a.container,
                           "mps_threads": a.mps_threads})


def _read(path: str) -> Allocation | None:
    try:
        raw = fastjson.loads(read_bounded(path, _MAX_RECORD))  # a FIFO or a link there is no record
        return Allocation(id=str(raw["id"]), resource=str(raw["resource"]), vendor=str(raw["vendor"]),
                          gpus=tuple(str(g) for g in raw["gpus"]), devices=tuple(str(d) for d in raw["devices"]),
                          shared=bool(raw["shared"]), created=float(raw["created"]), expires=float(raw["expires"]),
                          claimed_by=str(raw.get("claimed_by", "")), container=str(raw.get("container", "")),
                          mps_threads=int(raw.get("mps_threads", 0)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # fastjson bounds its depth
        return None
