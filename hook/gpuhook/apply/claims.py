"""Prepared DRA claims: what gpuhook's DRA driver prepared on this node, written at NodePrepareResources and
verified by the runtime when a container presents the claim (request/dra_claim.py). One file per claim,
state_dir/claims/<claim uid>.json, removed at NodeUnprepareResources. They are also the driver's checkpoint: a
restarted driver (or a kubelet that asks again) answers from them; a reboot empties /run, and the kubelet
prepares its pods' claims anew.
"""

from __future__ import annotations

import os

from gpuhook import fastjson
from gpuhook.apply.state_dir import ensure, records, unlink
from gpuhook.atomic import write_text
from gpuhook.plan.authority import ClaimedDevice, PreparedClaim
from gpuhook.statefile import read_bounded

DIR = "claims"
_MAX_RECORD = 1 << 18  # 128 devices with their names


def directory(state_dir: str) -> str:
    """state_dir/claims, made (0700) where missing."""
    path = os.path.join(ensure(state_dir), DIR)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _path(state_dir: str, uid: str) -> str:
    if not uid or "/" in uid or uid.startswith("."):
        raise ValueError(f"{uid!r} is not a claim UID")
    return os.path.join(directory(state_dir), f"{uid}.json")


def save(state_dir: str, claim: PreparedClaim) -> None:
    """Write a claim's record (atomically, 0600, durable: it is the driver's checkpoint). Writes a file."""
    write_text(_path(state_dir, claim.uid), _dump(claim), mode=0o600)


def load(state_dir: str, uid: str) -> PreparedClaim | None:
    """The record of claim `uid`, or None (never prepared here, unprepared, or unreadable). Reads a file."""
    try:
        return _read(_path(state_dir, uid))
    except ValueError:
        return None


def all_records(state_dir: str) -> list[PreparedClaim]:
    """Every readable record. Reads files."""
    return records(directory(state_dir), _read)


def remove(state_dir: str, uid: str) -> None:
    """Delete a claim's record (none is fine). Deletes a file."""
    unlink(_path(state_dir, uid))


def _dump(c: PreparedClaim) -> str:
    return fastjson.dumps({
        "uid": c.uid, "namespace": c.namespace, "name": c.name, "pods": list(c.pods), "prepared": c.prepared,
        "devices": [{"request": d.request, "device": d.device, "vendor": d.vendor, "gpu": d.gpu, "admin": d.admin,
                     "tuning": [list(kv) for kv in d.tuning], "share": d.share} for d in c.devices]})


def _read(path: str) -> PreparedClaim | None:
    try:
        raw = fastjson.loads(read_bounded(path, _MAX_RECORD))  # a FIFO or a link there is no record
        devices = tuple(ClaimedDevice(request=str(d["request"]), device=str(d["device"]), vendor=str(d["vendor"]),
                                      gpu=str(d["gpu"]),
                                      admin=bool(d.get("admin", False)),
                                      tuning=tuple((str(k), str(v)) for k, v in d.get("tuning") or ()),
                                      share=str(d.get("share", "")))
                        for d in raw["devices"])
        return PreparedClaim(uid=str(raw["uid"]), namespace=str(raw["namespace"]), name=str(raw["name"]),
                             devices=devices, pods=tuple(str(p) for p in raw.get("pods") or ()),
                             prepared=float(raw.get("prepared", 0.0)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # fastjson bounds its depth
        return None
