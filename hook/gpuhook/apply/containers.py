"""Which GPU containers gpuhook set up, with what driver and GPUs: for doctor's stale-driver report and the
exclusive-lease checks. One file per container, state_dir/containers/<id>.json; a file whose container is
gone is dropped when the files are read."""

from __future__ import annotations

import os

from gpuhook import fastjson
from gpuhook.apply.state_dir import ensure
from gpuhook.atomic import write_text
from gpuhook.frozen import frozen


@frozen
class ContainerRecord:
    """A GPU container gpuhook prepared."""

    id: str
    drivers: tuple[tuple[str, str], ...]  # (vendor, driver version whose user space it got)
    runtime_root: str = ""  # shim mode: the runtime's state dir (runc --root)
    pid: int = 0  # hook mode: the container's init pid, with its start time
    start_time: str = ""
    gpus: tuple[str, ...] = ()  # the GPUs it got (UUID, else PCI address)


def save(state_dir: str, rec: ContainerRecord) -> None:
    """Write a container's file (atomically). Writes a file."""
    directory = os.path.join(ensure(state_dir), "containers")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    write_text(os.path.join(directory, f"{os.path.basename(rec.id)}.json"),
               fastjson.dumps({"id": rec.id, "drivers": [list(d) for d in rec.drivers],
                               "runtime_root": rec.runtime_root, "pid": rec.pid, "start_time": rec.start_time,
                               "gpus": list(rec.gpus)}), mode=0o644)


def alive(rec: ContainerRecord) -> bool:
    """Whether the container still exists (its runtime state, or its init process, is there)."""
    from gpuhook.host.processes import start_time

    if rec.pid:
        return start_time(rec.pid) == rec.start_time != ""
    return os.path.exists(os.path.join(rec.runtime_root, rec.id, "state.json"))


def live_records(state_dir: str) -> list[ContainerRecord]:
    """Records of containers that still exist; the others are removed. Reads (and deletes) files."""
    directory = os.path.join(ensure(state_dir), "containers")
    out = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if not name.endswith(".json"):
            continue  # a writer's temporary file
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
