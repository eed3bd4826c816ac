"""What the DRA driver made for each claim (partitions made on demand, dra/partitionable.py): one file per claim,
state_dir/partitions/<claim uid>.json, written (0600, atomically) as soon as a partition is made and before the
claim's record, so that a prepare asked again finds it and an unprepare removes it; deleted when what it names is
removed. Reads and writes files."""

from __future__ import annotations

import contextlib
import os

from gpuhook import fastjson
from gpuhook.atomic import write_text
from gpuhook.frozen import frozen
from gpuhook.statefile import read_bounded

DIR = "partitions"
_MAX = 1 << 16


@frozen
class Made:
    """One partition made for a claim."""

    device: str  # the published device it was made for
    place: str  # where it sits on its GPU, in the vendor's words (a slice's place; "" for the GPU whole)
    gpu: str  # the physical GPU's key
    vendor: str
    mode: str = ""  # the mode the whole GPU took for it (AMD), "" for one made alone (MIG)
    uid: str = ""  # the claim's


def made_for(state_dir: str, uid: str) -> list[Made]:
    """What was made for claim `uid` ([] for nothing, or an unreadable file). Reads a file."""
    return _read(_path(state_dir, uid), uid)


def every_made(state_dir: str) -> list[Made]:
    """What was made for every claim. Reads files."""
    directory = os.path.dirname(_path(state_dir, "x"))
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    return [m for n in names if n.endswith(".json") and not n.startswith(".")
            for m in _read(os.path.join(directory, n), n[:-5])]


def save_made(state_dir: str, uid: str, made: list[Made]) -> None:
    """What was made for claim `uid`, written. Writes a file."""
    write_text(_path(state_dir, uid), fastjson.dumps({"made": [
        {"device": m.device, "place": m.place, "gpu": m.gpu, "vendor": m.vendor, "mode": m.mode} for m in made]}),
        mode=0o600, make_dirs=True)


def forget_made(state_dir: str, uid: str) -> None:
    """The claim's file deleted (none is fine). Deletes a file."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(state_dir, uid))


def _path(state_dir: str, uid: str) -> str:
    from gpuhook.apply.state_dir import ensure

    if not uid or "/" in uid or uid.startswith("."):
        raise ValueError(f"{uid!r} is not a claim UID")
    return os.path.join(ensure(state_dir), DIR, f"{uid}.json")


def _read(path: str, uid: str) -> list[Made]:
    try:
        raw = fastjson.loads(read_bounded(path, _MAX))  # a FIFO or a link there is nothing made
        return [Made(device=str(m["device"]), place=str(m["place"]), gpu=str(m["gpu"]), vendor=str(m["vendor"]),
                     mode=str(m.get("mode", "")), uid=uid) for m in raw["made"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
