"""Which GPU containers gpuhook set up, with what driver and GPUs (and, on Kubernetes, which pod's): for doctor's
stale-driver report, the exclusive-lease checks and the exporter. One file per container,
state_dir/containers/<id>.json; a file whose container is gone is dropped when the files are read."""

from __future__ import annotations

import os
import zlib

from gpuhook import fastjson
from gpuhook.apply.state_dir import ensure, unlink
from gpuhook.atomic import write_text
from gpuhook.frozen import frozen
from gpuhook.statefile import read_bounded
from gpuhook.vendors.contract import Setting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

_MAX_RECORD = 1 << 20


@frozen
class ContainerRecord:
    """A GPU container gpuhook prepared."""

    id: str
    drivers: tuple[tuple[str, str], ...]  # (vendor, driver version whose user space it got)
    runtime_root: str = ""  # shim mode: the runtime's state dir (runc --root)
    pid: int = 0  # hook mode: the container's init pid, with its start time
    start_time: str = ""
    gpus: tuple[str, ...] = ()  # the GPUs it got (UUID, else PCI address)
    creator: int = 0  # shim mode: the process that execs the runtime (runc create keeps its pid and start time):
    creator_start: str = ""  # while it runs the container is being created, even before runc writes its state
    copies: tuple[str, ...] = ()  # the procfs copies it mounts (gc removes those no live container has)
    pod: str = ""  # Kubernetes: the pod, its namespace and the container's name in it (request.container's
    namespace: str = ""  # pod_identity); empty outside Kubernetes, and in records written before they were kept
    container: str = ""
    planned: bool = False  # the shim's record, with its plan's tuning: the prestart hook applies it as it is
    settings: tuple[Setting, ...] = ()  # the host settings the prestart hook applies
    exclusive: tuple[str, ...] = ()  # the GPUs it leases

    def file_name(self) -> str:
        """Unique per container: its id and its runtime root (shim) or its init (hook mode), so the same id
        under two engines is two records."""
        tag = f"p{self.pid}-{self.start_time}" if self.pid else f"r{zlib.crc32(self.runtime_root.encode()):08x}"
        return f"{os.path.basename(self.id)}@{tag}.json"

    def stale_drivers(self, loaded: Mapping[str, str]) -> tuple[tuple[str, str, str], ...]:
        """(vendor, driver version it got, version loaded now) where the container runs an old driver's user
        space: the driver was upgraded or reloaded under it."""
        return tuple((v, got, now) for v, got in self.drivers if got and (now := loaded.get(v, "")) and got != now)


def save(state_dir: str, rec: ContainerRecord) -> None:
    """Write a container's file (atomically; not fsynced: a record names a live container, and after a power loss
    none is, while an unreadable record is skipped by every reader). Writes a file."""
    directory = os.path.join(ensure(state_dir), "containers")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    write_text(os.path.join(directory, rec.file_name()),
               fastjson.dumps({"id": rec.id, "drivers": [list(d) for d in rec.drivers],
                               "runtime_root": rec.runtime_root, "pid": rec.pid, "start_time": rec.start_time,
                               "gpus": list(rec.gpus), "creator": rec.creator, "creator_start": rec.creator_start,
                               "copies": list(rec.copies), "pod": rec.pod, "namespace": rec.namespace,
                               "container": rec.container, "planned": rec.planned,
                               "settings": [[x.vendor, x.gpu, x.index, x.pci, x.device, x.name, x.value]
                                            for x in rec.settings],
                               "exclusive": list(rec.exclusive)}), mode=0o644, durable=False)


def alive(rec: ContainerRecord, node_root: str = "/") -> bool:
    """Whether the container still exists (its runtime state, or its init process, is there). `node_root`: where
    the node's / is, for a reader in a container of its own (the runtime's state is a node path; pids are the
    node's, hostPID)."""
    from gpuhook.host.processes import start_time

    if rec.pid:
        return start_time(rec.pid) == rec.start_time != ""
    # the creator (runc, still creating it) first: runc writes state.json before it exits, so a creator found
    # gone has left the state behind if it made the container; state.json first would miss a runc that wrote it
    # and exited between the two looks (a GPU given twice by count:N, once in dozens of rounds)
    if rec.creator and start_time(rec.creator) == rec.creator_start != "":
        return True
    return os.path.exists(os.path.join(node_root, rec.runtime_root.lstrip("/"), rec.id, "state.json"))


def running(rec: ContainerRecord, node_root: str = "/") -> bool:
    """Whether the container's processes still run, which is what holds its GPUs (alive's container, less one that
    exited and waits for its engine to remove it): its init process, as the record or runc's state.json names it
    with its start time. A runtime state gpuhook cannot read is taken as running. Reads /proc and the state."""
    from gpuhook.host.processes import start_time

    if rec.pid or (rec.creator and start_time(rec.creator) == rec.creator_start != ""):
        return alive(rec, node_root)
    path = os.path.join(node_root, rec.runtime_root.lstrip("/"), rec.id, "state.json")
    try:
        state = fastjson.loads(read_bounded(path, 1 << 20))
        pid, start = state["init_process_pid"], state["init_process_start"]
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError):
        return alive(rec, node_root)  # another runtime's state (crun's): as alive says
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return alive(rec, node_root)
    return start_time(pid) == str(start) != ""


def remove(state_dir: str, rec: ContainerRecord) -> None:
    """Remove a container's record (it withdrew before its container was made). Deletes a file."""
    unlink(os.path.join(ensure(state_dir), "containers", rec.file_name()))


def drop_gone(state_dir: str, container_id: str) -> None:
    """poststop: remove the records of container `container_id` whose container is gone (only its own files are
    read, however many records there are). Deletes files."""
    for rec, path in _records(state_dir, f"{os.path.basename(container_id)}@"):
        if rec.id == container_id and not alive(rec):
            unlink(path)


def recorded(state_dir: str, container_id: str) -> bool:
    """Whether a live container `container_id` already has a record (the shim's, when the hook runs after it).
    Reads only that id's files."""
    return bool(_live_of(state_dir, container_id))


def gpus_of(state_dir: str, container_id: str) -> tuple[str, ...] | None:
    """The GPUs a live record of container `container_id` holds (the shim's, when the hook runs after it; a count
    request resolved there is not picked again); None without one. Reads only that id's files."""
    live = _live_of(state_dir, container_id)
    return live[0].gpus if live else None


def planned(state_dir: str, container_id: str) -> ContainerRecord | None:
    """The shim's record of container `container_id`, being created now, with its plan's tuning (the prestart
    hook applies that plan rather than reading the host again); None without one, or with more than one (the same
    id being created under two runtime roots). Reads only that id's files."""
    found = [rec for rec in _live_of(state_dir, container_id) if rec.planned and not rec.pid]
    return found[0] if len(found) == 1 else None


def _live_of(state_dir: str, container_id: str) -> list[ContainerRecord]:
    """The records of container `container_id` whose container is alive (only that id's files are read)."""
    return [rec for rec, _ in _records(state_dir, f"{os.path.basename(container_id)}@")
            if rec.id == container_id and alive(rec)]


def live_records(state_dir: str, prune: bool = True, node_root: str = "/") -> list[ContainerRecord]:
    """Records of containers that still exist (`node_root`: alive's); the others are removed (unless not
    `prune`). Reads (and deletes) files."""
    out = []
    for rec, path in _records(state_dir):
        if alive(rec, node_root):
            out.append(rec)
        elif prune:
            unlink(path)
    return out


def _records(state_dir: str, prefix: str = "") -> list[tuple[ContainerRecord, str]]:
    directory = os.path.join(ensure(state_dir), "containers")
    out = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if not name.endswith(".json") or not name.startswith(prefix):
            continue  # a writer's temporary file
        path = os.path.join(directory, name)
        try:
            raw = fastjson.loads(read_bounded(path, _MAX_RECORD))  # a FIFO or a link there is no record
            rec = ContainerRecord(id=raw["id"], drivers=tuple(tuple(d) for d in raw["drivers"]),
                                  runtime_root=raw.get("runtime_root", ""),
                                  pid=int(raw.get("pid", 0)), start_time=raw.get("start_time", ""),
                                  gpus=tuple(raw.get("gpus", ())),
                                  creator=int(raw.get("creator", 0)), creator_start=raw.get("creator_start", ""),
                                  copies=tuple(raw.get("copies", ())), pod=str(raw.get("pod", "")),
                                  namespace=str(raw.get("namespace", "")), container=str(raw.get("container", "")),
                                  planned=raw.get("planned") is True,
                                  settings=tuple(Setting(vendor=str(v), gpu=str(g), index=int(i), pci=str(pc),
                                                         device=str(dv), name=str(n), value=str(val))
                                        for v, g, i, pc, dv, n, val in raw.get("settings", ())),
                                  exclusive=tuple(str(g) for g in raw.get("exclusive", ())))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out.append((rec, path))
    return out

