"""The rules -> cgroup v2 device filter compiler, tested with literals: the exact program for small rule sets, and
what a compiled program decides (run by a small interpreter of the instructions it may contain) for tables of
requests."""

from __future__ import annotations

import pytest

from gpuhook.apply import device_filter as f
from gpuhook.apply.device_filter import Rule
from gpuhook.edits import DeviceRule
from gpuhook.errors import CgroupError

ANY = None


def run(insns: list[f.Insn], kind: str, major: int, minor: int, access: str) -> bool:
    """Interpret the program for one request as the kernel's BPF_CGROUP_DEVICE hook would make it."""
    ctx = (f.TYPES[kind] | sum(f.ACCESS[a] for a in access) << 16, major, minor)  # struct bpf_cgroup_dev_ctx
    reg = [0] * 11
    pc = 0
    for _ in range(10_000):
        code, dst, src, off, imm = insns[pc]
        pc += 1
        if code == f.LDX_W:
            assert src == 1 and off in (0, 4, 8), "loads only from the context"
            reg[dst] = ctx[off // 4]
        elif code == f.AND32_K:
            reg[dst] = (reg[dst] & imm) & 0xFFFFFFFF
        elif code == f.RSH32_K:
            reg[dst] = (reg[dst] & 0xFFFFFFFF) >> imm
        elif code == f.MOV32_K:
            reg[dst] = imm & 0xFFFFFFFF
        elif code == f.MOV32_X:
            reg[dst] = reg[src] & 0xFFFFFFFF
        elif code == f.JNE_K:
            pc += off if reg[dst] != imm else 0
        elif code == f.JNE_X:
            pc += off if reg[dst] != reg[src] else 0
        elif code == f.EXIT:
            assert reg[0] in (0, 1)
            return reg[0] == 1
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
    raise AssertionError("the program does not end")


def decide(rules: list[Rule], requests: list[tuple[str, int, int, str]]) -> list[bool]:
    insns = f.instructions(f.emulate(rules))
    return [run(insns, *req) for req in requests]


def test_the_exact_program_for_a_deny_all_and_one_device() -> None:
    rules = [Rule(allow=False, kind="a", major=ANY, minor=ANY, access="rwm"), Rule(allow=True, kind="c", major=195,
                                                                                   minor=0, access="rw")]
    assert f.instructions(f.emulate(rules)) == [
        (f.LDX_W, 2, 1, 0, 0), (f.AND32_K, 2, 0, 0, 0xFFFF),  # r2 = type
        (f.LDX_W, 3, 1, 0, 0), (f.RSH32_K, 3, 0, 0, 16),  # r3 = access
        (f.LDX_W, 4, 1, 4, 0), (f.LDX_W, 5, 1, 8, 0),  # r4 = major, r5 = minor
        (f.JNE_K, 2, 0, 7, 2),  # not a char device: to the next block
        (f.MOV32_X, 1, 3, 0, 0), (f.AND32_K, 1, 0, 0, 6), (f.JNE_X, 1, 3, 4, 0),  # asks more than rw
        (f.JNE_K, 4, 0, 3, 195), (f.JNE_K, 5, 0, 2, 0),
        (f.MOV32_K, 0, 0, 0, 1), (f.EXIT, 0, 0, 0, 0),  # allowed
        (f.MOV32_K, 0, 0, 0, 0), (f.EXIT, 0, 0, 0, 0),  # the default-deny tail
    ]


def test_no_rules_is_the_default_deny_tail_alone() -> None:
    insns = f.instructions(f.emulate([]))
    assert insns[6:] == [(f.MOV32_K, 0, 0, 0, 0), (f.EXIT, 0, 0, 0, 0)]
    assert decide([], [("c", 1, 3, "r"), ("b", 8, 0, "m")]) == [False, False]


def test_encoding_little_and_big_endian() -> None:
    insn = [(f.JNE_K, 4, 0, 3, 195)]
    assert f.encode(insn) == bytes([0x55, 0x04, 3, 0, 195, 0, 0, 0])
    assert f.encode(insn, "big") == bytes([0x55, 0x40, 0, 3, 0, 0, 0, 195])
    assert f.encode([(f.LDX_W, 2, 1, 0, 0)]) == bytes([0x61, 0x12, 0, 0, 0, 0, 0, 0])  # src in the high nibble
    assert len(f.compile_rules([Rule(allow=True, kind="c", major=1, minor=3,
                                     access="rwm")])) == 8 * (6 + 5 + 2)  # prologue, block, tail


RUNC_GPU = f.container_rules({"linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}}, "runc",
                             [DeviceRule("c", 195, 0), DeviceRule("c", 226, 128, "rw")])
CRUN = f.container_rules({"linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}}, "crun", [])


@pytest.mark.parametrize(("rules", "request_", "allowed"), [
    (RUNC_GPU, ("c", 195, 0, "rw"), True),  # gpuhook's node
    (RUNC_GPU, ("c", 195, 1, "rw"), False),  # the other GPU
    (RUNC_GPU, ("c", 226, 128, "rw"), True),
    (RUNC_GPU, ("c", 226, 128, "m"), True),  # mknod: the runtime's "c *:* m"
    (RUNC_GPU, ("c", 226, 128, "rwm"), False),  # v1 semantics: one rule must hold all a request asks
    (RUNC_GPU, ("c", 226, 129, "r"), False),
    (RUNC_GPU, ("c", 1, 3, "rw"), True),  # /dev/null, the runtime's own
    (RUNC_GPU, ("c", 1, 9, "r"), True),  # /dev/urandom
    (RUNC_GPU, ("c", 136, 7, "rw"), True),  # /dev/pts/7: a wildcard minor
    (RUNC_GPU, ("c", 10, 200, "rw"), True),  # runc's tun
    (RUNC_GPU, ("c", 5, 1, "rw"), False),  # /dev/console: not runc's rule
    (RUNC_GPU, ("b", 8, 0, "r"), False),  # a disk
    (RUNC_GPU, ("b", 8, 0, "m"), True),  # mknod of anything, by the runtime's "b *:* m"
    (CRUN, ("c", 5, 1, "w"), True),  # crun's console
    (CRUN, ("c", 10, 200, "rw"), False),  # crun has no tun rule
    (CRUN, ("c", 195, 0, "r"), False),
], ids=["gpu", "other-gpu", "render", "render-mknod", "render-rwm", "other-render", "null", "urandom", "pts",
        "runc-tun", "runc-console", "disk", "disk-mknod", "crun-console", "crun-tun", "crun-no-gpu"])
def test_allow_deny_table(rules: tuple[Rule, ...], request_: tuple[str, int, int, str], allowed: bool) -> None:
    assert decide(list(rules), [request_]) == [allowed]


def test_wildcard_major_and_minor() -> None:
    rules = [Rule(allow=True, kind="c", major=ANY, minor=3, access="r"), Rule(allow=True, kind="c", major=226,
                                                                              minor=ANY, access="rw")]
    assert decide(rules, [("c", 7, 3, "r"), ("c", 7, 3, "w"), ("c", 7, 4, "r"), ("c", 226, 5, "rw"),
                          ("c", 225, 5, "r")]) == [True, False, False, True, False]


def test_block_and_char_are_told_apart() -> None:
    rules = [Rule(allow=True, kind="b", major=8, minor=0, access="r"), Rule(allow=True, kind="c", major=1, minor=3,
                                                                            access="rwm")]
    assert decide(rules, [("b", 8, 0, "r"), ("c", 8, 0, "r"), ("b", 1, 3, "r"), ("c", 1, 3, "r")]) == \
        [True, False, False, True]


def test_allow_all_then_deny_is_a_deny_list() -> None:
    rules = [Rule(allow=True, kind="a", major=ANY, minor=ANY, access="rwm"), Rule(allow=False, kind="c", major=195,
                                                                                  minor=ANY, access="rwm")]
    policy = f.emulate(rules)
    assert policy == f.Policy(True, (Rule(allow=False, kind="c", major=195, minor=ANY, access="rwm"),))
    assert f.instructions(policy)[-2] == (f.MOV32_K, 0, 0, 0, 1)  # the tail allows
    assert decide(rules, [("c", 195, 3, "r"), ("c", 1, 3, "r"), ("b", 8, 0, "rw")]) == [False, True, True]


@pytest.mark.parametrize(("rules", "exceptions"), [
    ([Rule(allow=True, kind="c", major=1, minor=3, access="r"), Rule(allow=True, kind="c", major=1, minor=3,
                                                                     access="w")], (Rule(allow=True, kind="c", major=1,
                                                                                         minor=3,
                                                                                         access="rw"),)),  # merged
    ([Rule(allow=True, kind="c", major=1, minor=3, access="rwm"), Rule(allow=False, kind="c", major=1, minor=3,
                                                                       access="w")], (Rule(allow=True, kind="c",
                                                                                           major=1, minor=3,
                                                                                           access="rm"),)),  # taken
    ([Rule(allow=True, kind="c", major=1, minor=3, access="rwm"), Rule(allow=False, kind="c", major=1, minor=3,
                                                                       access="rwm")], ()),
    ([Rule(allow=True, kind="c", major=1, minor=3, access="rwm"), Rule(allow=False, kind="a", major=ANY, minor=ANY,
                                                                       access="rwm")], ()),  # "a" resets
    ([Rule(allow=True, kind="c", major=9, minor=1, access="r"), Rule(allow=True, kind="b", major=1, minor=1,
                                                                     access="r"), Rule(allow=True, kind="c", major=ANY,
                                                                                       minor=ANY, access="m")],
     (Rule(allow=True, kind="c", major=ANY, minor=ANY, access="m"), Rule(allow=True, kind="b", major=1, minor=1,
                                                                         access="r"), Rule(allow=True, kind="c",
                                                                                           major=9, minor=1,
                                                                                           access="r"))),  # sorted
], ids=["union", "partial-deny", "deny-all-of-one", "reset", "order"])
def test_emulated_exceptions(rules: list[Rule], exceptions: tuple[Rule, ...]) -> None:
    assert f.emulate(rules) == f.Policy(False, exceptions)


def test_a_hole_in_a_wildcard_is_refused() -> None:
    with pytest.raises(CgroupError, match=r"cannot take m from the wider rule c \*:\*"):
        f.emulate([Rule(allow=True, kind="c", major=ANY, minor=ANY, access="m"), Rule(allow=False, kind="c", major=1,
                                                                                      minor=3, access="m")])


def test_runc_drops_an_implicit_rule_for_a_path_the_spec_lists() -> None:
    spec = {"linux": {"devices": [{"path": "/dev/null", "type": "c", "major": 1, "minor": 3}]}}
    assert decide(list(f.container_rules(spec, "runc", [])), [("c", 1, 3, "r"), ("c", 1, 5, "r")]) == [False, True]
    assert decide(list(f.container_rules(spec, "crun", [])), [("c", 1, 3, "r")]) == [True]


def test_spec_rules_follow_the_runtime_spec() -> None:
    assert f.spec_rules([{"allow": True, "type": "c", "major": 195, "access": "wr"}, {"allow": False, "access": "m"},
                         {"allow": True, "type": "b", "major": -1, "minor": 2, "access": "mrw"}]) == (
        Rule(allow=True, kind="c", major=195, minor=ANY, access="rw"), Rule(allow=False, kind="a", major=ANY, minor=ANY,
                                                                            access="m"), Rule(allow=True, kind="b",
                                                                                              major=ANY, minor=2,
                                                                                              access="rwm"))


@pytest.mark.parametrize("entry", [
    {"allow": True, "type": "x", "access": "rwm"}, {"allow": True, "access": ""}, {"allow": True},
    {"allow": True, "access": "rx"}, {"allow": True, "type": "c", "major": "195", "access": "r"},
    {"allow": True, "type": "c", "major": True, "access": "r"}, {"allow": True, "type": "c", "minor": 1 << 32,
                                                                 "access": "r"}, "c 195:0 rwm",
], ids=["type", "empty-access", "no-access", "access-letter", "string-major", "bool-major", "huge-minor", "text"])
def test_spec_rules_the_runtime_would_refuse(entry: object) -> None:
    with pytest.raises(CgroupError, match=r"linux.resources.devices\[0\]"):
        f.spec_rules([entry])


def test_gpuhook_rules_come_last_and_win() -> None:
    """A spec that denies the device gpuhook was asked for: gpuhook's rule comes after it, as in shim mode."""
    spec = {"linux": {"resources": {"devices": [{"allow": False, "type": "c", "major": 195, "minor": 0,
                                                 "access": "rwm"}]}}}
    rules = f.container_rules(spec, "runc", [DeviceRule("c", 195, 0)])
    assert rules[-1] == Rule(allow=True, kind="c", major=195, minor=0, access="rwm")
    assert decide(list(rules), [("c", 195, 0, "rw")]) == [True]


def test_numbers_as_runc_takes_them() -> None:
    """-1 is runc's wildcard in the emulation; -2 is a number there, but any in runc's program; past 2^31 a number
    matches nothing (runc compares it sign-extended); past 2^32 runc refuses the container."""
    rules = f.spec_rules([{"allow": True, "type": "c", "major": -1, "minor": -2, "access": "rw"},
                          {"allow": True, "type": "c", "major": 1 << 31, "minor": 3, "access": "rw"}])
    assert rules[0].major is None and rules[0].minor == -2 and rules[1].major == 1 << 31
    insns = f.instructions(f.emulate(rules))
    compares = [i for i in insns if i[0] == f.JNE_K and i[1] in (4, 5)]
    assert compares == []  # the first rule is any c device rw; the second can match nothing and is left out
    minimal = [{"allow": True, "major": 1, "minor": 255, "access": "wm"},
               {"allow": False, "type": "c", "major": -2, "access": "m"}]  # the reported case: runc denies c mknod
    policy = f.emulate(f.spec_rules(minimal))
    assert policy.default_allow and policy.exceptions == (f.Rule(allow=False, kind="c", major=-2, minor=None,
                                                                 access="m"),)
    block = f.instructions(policy)
    assert [i[4] for i in block if i[0] == f.JNE_K and i[1] == 2] == [f.TYPES["c"]]  # one block: char devices
    assert not [i for i in block if i[0] == f.JNE_K and i[1] in (4, 5)]  # whatever their numbers: denied


def test_crun_reads_rules_its_own_way() -> None:
    """crun 1.8: no emulation; "" is a char rule, null an any-type one; a truncated or negative number is any;
    letters it does not know are dropped, and an empty access matches nothing."""
    from gpuhook.apply import device_filter_crun as crun

    got = crun.rules([{"allow": True, "type": "", "major": 1, "access": "rwx"},
                      {"allow": False, "type": None, "major": 1 << 31, "minor": (1 << 32) - 1, "access": ""},
                      {"allow": True, "type": "b", "major": -5, "minor": 3, "access": "m"}, "junk"])
    assert got == [f.Rule(allow=True, kind="c", major=1, minor=None, access="rw"), f.Rule(allow=False, kind="a",
                                                                                          major=None, minor=None,
                                                                                          access=""),
                   f.Rule(allow=True, kind="b", major=None, minor=3, access="m")]
    wildcard = {"linux": {"resources": {"devices": [{"allow": True, "access": "rwm"}]}}}
    insns = crun.instructions(wildcard, [])
    assert insns[-2:] == [(f.MOV32_K, 0, 0, 0, 1), (f.EXIT, 0, 0, 0, 0)]  # allow all: crun's last block, no deny
