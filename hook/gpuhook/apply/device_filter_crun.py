"""crun's cgroup v2 device filter, as crun 1.8 builds it (cgroup-resources.c, ebpf.c). Pure.

crun has no v1 emulation: it writes one block per rule and the first block that matches decides. Its own default
devices come first (in reverse order), then the spec's `linux.resources.devices` from the last to the first, then
deny. A rule of type "a" (or no type) matches every type; any other type but "b" is a char rule ("" included);
numbers are C ints (truncated to 32 bits; a negative one matches any); access letters other than r, w, m are
ignored, and an empty access matches nothing. Once a block matches everything, crun adds no more (nor the final
deny). crun refuses none of these. gpuhook's own rules come after the spec's, as in shim mode, so they are
checked before them."""

from __future__ import annotations

from gpuhook.apply.device_filter import EXIT, IMPLICIT, MOV32_K, PROLOGUE, Rule, block

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from gpuhook.apply.device_filter import Insn
    from gpuhook.edits import DeviceRule


def rules(entries: Sequence[Any]) -> list[Rule]:
    """`linux.resources.devices` as crun reads it (entries that are not objects are skipped)."""
    out = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        kind = e.get("type")
        out.append(Rule(allow=e.get("allow") is True, kind="a" if not isinstance(kind, str) else
                        {"a": "a", "b": "b"}.get(kind[:1], "c"), major=_int(e.get("major")), minor=_int(e.get("minor")),
                        access="".join(a for a in str(e.get("access") or "") if a in "rwm")))
    return out


def _int(value: object) -> int | None:
    """A number as crun's C int holds it; None (any) when absent, null or negative."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    n = (value + (1 << 31)) % (1 << 32) - (1 << 31)
    return n if n >= 0 else None


def instructions(spec: dict[str, Any], added: Sequence[DeviceRule]) -> list[Insn]:
    """crun's program for `spec` with `added` (gpuhook's allow rules) after the spec's rules."""
    linux = spec.get("linux") or {}
    own = [Rule(allow=True, kind=r.kind, major=r.major, minor=r.minor, access=r.access) for r in added]
    ordered = [*(rule for _, rule in reversed(IMPLICIT["crun"])),
               *reversed([*rules((linux.get("resources") or {}).get("devices") or []), *own])]
    out = list(PROLOGUE)
    for r in ordered:
        if not r.access:
            continue  # crun's block demands an access no request has: it matches nothing
        out += block(r)
        if r.kind == "a" and r.major is None and r.minor is None and set(r.access) == {"r", "w", "m"}:
            return out  # everything matches here: crun stops, with no final deny
    return [*out, (MOV32_K, 0, 0, 0, 0), (EXIT, 0, 0, 0, 0)]
