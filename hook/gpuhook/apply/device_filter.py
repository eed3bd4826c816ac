"""A container's device rules compiled into a cgroup v2 device filter (a BPF_PROG_TYPE_CGROUP_DEVICE program). Pure.

The rules are the ones the runtime itself compiled when it created the container: the spec's
`linux.resources.devices` in order, then the runtime's own implicit rules (`IMPLICIT`: /dev/null, /dev/pts, mknod
of anything, ...), then gpuhook's. They are first reduced the way cgroup v1's devices controller would hold them
(a default, allow or deny, and the exceptions to it: `emulate`), so that v1 and v2 hosts give a container the same
devices, and then encoded: one block per exception, each falling through to the next on the first field that
differs, and the default as the tail. The encoding is ours; the layout of the context (`struct bpf_cgroup_dev_ctx`:
access type, major, minor) and of an instruction are the kernel's.
"""

from __future__ import annotations

from gpuhook.errors import CgroupError
from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, Literal

    from gpuhook.edits import DeviceRule

    Insn = tuple[int, int, int, int, int]  # code, dst register, src register, offset, immediate

NAME = "gpuhook_dev"  # the programs gpuhook loads carry this name (at most 15 characters)
LICENSE = "Apache-2.0"
ACCESS = {"m": 1, "r": 2, "w": 4}  # BPF_DEVCG_ACC_MKNOD, _READ, _WRITE
TYPES = {"b": 1, "c": 2}  # BPF_DEVCG_DEV_BLOCK, _CHAR
_MAX = (1 << 31) - 1  # an immediate is signed 32-bit; Linux majors have 12 bits, minors 20
_MAX_U32 = (1 << 32) - 1  # runc refuses a larger number; one above _MAX it compares sign-extended: it matches none

# the instructions used (class | operation | source)
LDX_W = 0x61  # dst = *(u32 *)(src + off)
AND32_K, RSH32_K, MOV32_K, MOV32_X = 0x54, 0x74, 0xB4, 0xBC  # 32-bit ALU with an immediate / a register
JNE_K, JNE_X = 0x55, 0x5D  # if dst != imm (src) goto pc + 1 + off
EXIT = 0x95  # return r0
_NEXT = -(1 << 15)  # a jump's offset before it is known: to the next block


@frozen
class Rule:
    """One device cgroup rule as the runtime spec has it; None for a wildcard number (absent, null or -1), kind "a"
    for every device. Other negative numbers are kept: runc's emulator holds them as numbers of their own, and its
    program then takes any negative number for any (see `instructions`)."""

    allow: bool
    kind: str  # "a", "b" or "c"
    major: int | None
    minor: int | None
    access: str  # some of "rwm"


@frozen
class Policy:
    """What a device cgroup holds after a list of rules: a default and the exceptions to it, in a fixed order."""

    default_allow: bool
    exceptions: tuple[Rule, ...]


def _implicit(*rules: tuple[str | None, str, int | None, int | None, str]) -> tuple[tuple[str | None, Rule], ...]:
    return tuple((path, Rule(allow=True, kind=kind, major=major, minor=minor, access=access)) for path, kind, major,
                 minor, access in rules)


# What each runtime adds to every container's rules after the spec's (runc's specconv.AllowedDevices; crun's
# default_devices in cgroup-resources.c). runc drops one that names a path the spec's linux.devices has.
IMPLICIT = {
    "runc": _implicit((None, "c", None, None, "m"), (None, "b", None, None, "m"), ("/dev/null", "c", 1, 3, "rwm"),
                      ("/dev/random", "c", 1, 8, "rwm"), ("/dev/full", "c", 1, 7, "rwm"),
                      ("/dev/tty", "c", 5, 0, "rwm"), ("/dev/zero", "c", 1, 5, "rwm"),
                      ("/dev/urandom", "c", 1, 9, "rwm"), (None, "c", 136, None, "rwm"),
                      (None, "c", 5, 2, "rwm"), (None, "c", 10, 200, "rwm")),
    "crun": _implicit((None, "c", None, None, "m"), (None, "b", None, None, "m"), (None, "c", 1, 3, "rwm"),
                      (None, "c", 1, 8, "rwm"), (None, "c", 1, 7, "rwm"), (None, "c", 5, 0, "rwm"),
                      (None, "c", 1, 5, "rwm"), (None, "c", 1, 9, "rwm"), (None, "c", 5, 1, "rwm"),
                      (None, "c", 136, None, "rwm"), (None, "c", 5, 2, "rwm")),
}


def spec_rules(entries: Iterable[Any]) -> tuple[Rule, ...]:
    """`linux.resources.devices` as rules; CgroupError naming the entry the runtime itself would refuse."""
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise CgroupError(f"linux.resources.devices[{i}] is not an object")
        kind, access = e.get("type") or "a", e.get("access")
        if kind not in ("a", "b", "c") or not isinstance(access, str) or not access or set(access) - set(ACCESS):
            raise CgroupError(f"linux.resources.devices[{i}] ({e}) is not a device rule (type a, b or c; access "
                              "some of rwm)")
        out.append(Rule(allow=e.get("allow") is True, kind=kind, major=_number(e.get("major"), i),
                        minor=_number(e.get("minor"), i),
                        access="".join(sorted(set(access), key="rwm".index))))
    return tuple(out)


def _number(value: object, i: int) -> int | None:
    if value is None or value == -1:
        return None  # absent, null, and runc's -1: any number
    if not isinstance(value, int) or isinstance(value, bool) or value > _MAX_U32:
        raise CgroupError(f"linux.resources.devices[{i}] has a device number {value!r} that is not one")
    return value  # -2 and the like stay numbers for the emulation (runc's Wildcard is -1 alone)


def container_rules(spec: dict[str, Any], runtime: str, added: Sequence[DeviceRule]) -> tuple[Rule, ...]:
    """The rules `runtime` compiled for the container of `spec` (runc's where the runtime is unknown), then `added`."""
    linux = spec.get("linux") or {}
    paths = {d.get("path") for d in linux.get("devices") or [] if isinstance(d, dict)}
    implicit = IMPLICIT.get(runtime, IMPLICIT["runc"])
    own = [rule for path, rule in implicit if runtime == "crun" or path is None or path not in paths]
    extra = [Rule(allow=True, kind=r.kind, major=r.major, minor=r.minor, access=r.access) for r in added]
    return (*spec_rules((linux.get("resources") or {}).get("devices") or []), *own, *extra)


def emulate(rules: Iterable[Rule]) -> Policy:
    """The device cgroup v1 semantics: "a" rules reset the default; other rules add to or take from the exceptions.
    A container starts with every device denied (as runc's and crun's programs do). CgroupError for a rule that
    would punch a hole in a wildcard exception, which cgroup v1 would silently ignore."""
    default_allow = False
    held: dict[tuple[str, int | None, int | None], set[str]] = {}
    for r in rules:
        if r.kind == "a":
            default_allow, held = r.allow, {}
            continue
        key, access = (r.kind, r.major, r.minor), set(r.access)
        if r.allow != default_allow:
            held.setdefault(key, set()).update(access)
            continue
        for wider in ((r.kind, None, r.minor), (r.kind, r.major, None), (r.kind, None, None)):
            if wider != key and held.get(wider, set()) & access:
                raise CgroupError(f"a device rule ({'allow' if r.allow else 'deny'} {_text(r)}) cannot take "
                                  f"{''.join(sorted(held[wider] & access))} from the wider rule {_text(*wider)}")
        left = held.get(key, set()) - access
        if left:
            held[key] = left
        else:
            held.pop(key, None)
    order = sorted(held, key=lambda k: (-1 if k[1] is None else k[1], -1 if k[2] is None else k[2], k[0]))
    return Policy(default_allow, tuple(Rule(allow=not default_allow, kind=k[0], major=k[1], minor=k[2],
                                            access="".join(a for a in "rwm" if a in held[k])) for k in order))


def _text(r: Rule | str, major: int | None = None, minor: int | None = None) -> str:
    if isinstance(r, Rule):
        return f"{r.kind} {_star(r.major)}:{_star(r.minor)} {r.access}"
    return f"{r} {_star(major)}:{_star(minor)}"


def _star(n: int | None) -> str:
    return "*" if n is None else str(n)


def instructions(policy: Policy) -> list[Insn]:
    """The program: load the context into r2 (type), r3 (access), r4 (major), r5 (minor); one block per exception
    returning its verdict when every field it names matches; then the default."""
    out = list(PROLOGUE)
    for r in policy.exceptions:
        if any(n is not None and n > _MAX for n in (r.major, r.minor)):
            continue  # runc compares it as a negative immediate with a 32-bit field: no device matches
        out += block(r)
    return [*out, (MOV32_K, 0, 0, 0, int(policy.default_allow)), (EXIT, 0, 0, 0, 0)]


# the context into r2 (type), r3 (access), r4 (major), r5 (minor), as runc, crun and systemd load it
PROLOGUE: tuple[Insn, ...] = ((LDX_W, 2, 1, 0, 0), (AND32_K, 2, 0, 0, 0xFFFF), (LDX_W, 3, 1, 0, 0),
                              (RSH32_K, 3, 0, 0, 16), (LDX_W, 4, 1, 4, 0), (LDX_W, 5, 1, 8, 0))


def block(r: Rule) -> list[Insn]:
    """One rule's block: its verdict when every field it names matches (kind "a": any type; a negative number:
    any number), else on to the next block."""
    out: list[Insn] = [] if r.kind == "a" else [(JNE_K, 2, 0, _NEXT, TYPES[r.kind])]
    access = sum(ACCESS[a] for a in set(r.access))
    if access != 7:  # every bit the request has must be the rule's: (r3 & access) == r3
        out += [(MOV32_X, 1, 3, 0, 0), (AND32_K, 1, 0, 0, access), (JNE_X, 1, 3, _NEXT, 0)]
    out += [(JNE_K, reg, 0, _NEXT, n) for reg, n in ((4, r.major), (5, r.minor)) if n is not None and n >= 0]
    out += [(MOV32_K, 0, 0, 0, int(r.allow)), (EXIT, 0, 0, 0, 0)]
    return [(c, d, s, len(out) - i - 1 if off == _NEXT else off, imm)  # to the next block's first instruction
            for i, (c, d, s, off, imm) in enumerate(out)]


def encode(insns: Iterable[Insn], byteorder: Literal["little", "big"] = "little") -> bytes:
    """struct bpf_insn, 8 bytes each: code, the registers' nibbles (dst first in memory order), offset, immediate."""
    out = bytearray()
    for code, dst, src, off, imm in insns:
        regs = (src << 4 | dst) if byteorder == "little" else (dst << 4 | src)
        out += bytes((code, regs)) + off.to_bytes(2, byteorder, signed=True) + imm.to_bytes(4, byteorder, signed=True)
    return bytes(out)


def compile_rules(rules: Iterable[Rule], byteorder: Literal["little", "big"] = "little") -> bytes:
    """The device filter allowing exactly what `rules` allow (runc's semantics), ready for BPF_PROG_LOAD."""
    return encode(instructions(emulate(rules)), byteorder)
