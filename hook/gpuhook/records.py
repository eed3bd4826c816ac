"""Which GPU containers gpuhook set up, with what driver: for `gpuhook doctor`'s stale-driver report.
Records live in state_dir/containers/<id>.json; a record whose container is gone is dropped when read."""

from __future__ import annotations

import os

from gpuhook import fastjson
from gpuhook.record import record


@record
class ContainerRecord:
    """A GPU container gpuhook prepared."""

    id: str
    drivers: tuple[tuple[str, str], ...]  # (vendor, driver version whose user space it got)
    runtime_root: str = ""  # shim mode: the runtime's state dir (runc --root)
    pid: int = 0  # hook mode: the container's init pid, with its start time
    start_time: str = ""
    gpus: tuple[str, ...] = ()  # the GPUs it got (UUID, else PCI address)


def save(state_dir: str, rec: ContainerRecord) -> None:
    """Write a record (temp + rename). Writes a file."""
    directory = os.path.join(state_dir, "containers")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, f"{os.path.basename(rec.id)}.json")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(fastjson.dumps({"id": rec.id, "drivers": [list(d) for d in rec.drivers],
                                "runtime_root": rec.runtime_root, "pid": rec.pid, "start_time": rec.start_time,
                                "gpus": list(rec.gpus)}))
    os.replace(tmp, path)


def start_time(pid: int) -> str:
    """A live process's start time (field 22 of /proc/<pid>/stat), which tells a pid's reuse apart;
    "" when it is gone or a zombie (a killed container's init may wait a while to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return ""
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else ""


def holder_alive(holder: dict[str, object]) -> bool:
    """Whether a ledger holder's container is still there (its init process, with the same start time)."""
    start = holder.get("start")
    return bool(start) and start_time(int(str(holder.get("pid", 0)))) == start


def alive(rec: ContainerRecord) -> bool:
    """Whether the container still exists (its runtime state, or its init process, is there)."""
    if rec.pid:
        return start_time(rec.pid) == rec.start_time != ""
    return os.path.exists(os.path.join(rec.runtime_root, rec.id, "state.json"))


def live_records(state_dir: str) -> list[ContainerRecord]:
    """Records of containers that still exist; the others are removed. Reads (and deletes) files."""
    directory = os.path.join(state_dir, "containers")
    out = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as f:
                raw = fastjson.loads(f.read())
            rec = ContainerRecord(raw["id"], tuple(tuple(d) for d in raw["drivers"]), raw.get("runtime_root", ""),
                                  int(raw.get("pid", 0)), raw.get("start_time", ""), tuple(raw.get("gpus", ())))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if alive(rec):
            out.append(rec)
        else:
            os.unlink(path)
    return out
