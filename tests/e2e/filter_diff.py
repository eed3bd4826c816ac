"""Driver for test_filter_differential.py, run inside a private mount namespace with cgroup2 over /sys/fs/cgroup:
  python filter_diff.py SEED COUNT WORKDIR ROOTFS [RUNTIME]
For COUNT random `linux.resources.devices` lists (from SEED): real runc creates a container with the list (its own
eBPF device filter attached to the container's cgroup); gpuhook compiles the same list into its filter, attached to
a scratch cgroup. A process moved into each cgroup then opens every probe node for reading and for writing and
makes it (mknod); EPERM is "denied", anything else "allowed". Prints one JSON line per list:
{"rules": [...], "runc": "refused" | {probe: verdicts}, "gpuhook": "refused: why" | {...}}."""

from __future__ import annotations

import errno
import json
import os
import random
import subprocess
import sys
from pathlib import Path

HOOK = str(Path(__file__).parents[2] / "hook")
sys.path.insert(0, HOOK)

from gpuhook import syscalls  # noqa: E402
from gpuhook.apply import runtime_filter  # noqa: E402
from gpuhook.errors import CgroupError  # noqa: E402
from gpuhook.testing.bundle import make_bundle, oci_config  # noqa: E402

MAJORS = (1, 5, 10, 136, 195, 226)
MINORS = (0, 1, 3, 200, 255)
# 33 probe nodes: every listed char major with three minors, the block ones with two, and a few odd ones
NODES = ([("c", ma, mi) for ma in MAJORS for mi in (0, 3, 255)] + [("b", ma, mi) for ma in (1, 5, 195) for mi in (0, 3)]
         + [("c", 10, 200), ("c", 136, 1), ("c", 7, 7), ("b", 7, 0), ("c", 4095, 0), ("b", 226, 1), ("c", 1, 1),
            ("c", 5, 1), ("c", 5, 2)])
NUMBERS = (None, "absent", -1, -2, *MAJORS, 1 << 31)
MINOR_NUMBERS = (None, "absent", -1, -3, *MINORS, (1 << 32) - 1)


def random_rules(rng: random.Random) -> list[dict[str, object]]:
    out = []
    for _ in range(rng.randint(1, 5)):
        rule: dict[str, object] = {"allow": rng.random() < 0.5,
                                   "access": rng.choice(["r", "w", "m", "rw", "rm", "wm", "rwm", "rwm", "mr"])}
        kind = rng.choice(["a", "b", "c", "c", "c", "", None, "absent"])
        if kind != "absent":
            rule["type"] = kind
        for key, pool in (("major", NUMBERS), ("minor", MINOR_NUMBERS)):
            value = rng.choice(pool)
            if value != "absent":
                rule[key] = value
        out.append(rule)
    return out


def probe(cgroup: Path, nodes: Path, scratch: Path) -> dict[str, str]:
    """Each node's verdicts (r, w, m: "+" allowed, "-" denied) for a process in `cgroup`."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
            got = {}
            for i, (kind, major, minor) in enumerate(NODES):
                verdict = ""
                for flags in (os.O_RDONLY, os.O_WRONLY):
                    try:
                        os.close(os.open(nodes / str(i), flags | os.O_NONBLOCK))
                        verdict += "+"
                    except OSError as e:
                        verdict += "-" if e.errno == errno.EPERM else "+"
                target = scratch / f"m{i}"
                try:
                    os.mknod(target, (0o20600 if kind == "c" else 0o60600), os.makedev(major, minor))
                    os.unlink(target)
                    verdict += "+"
                except OSError as e:
                    verdict += "-" if e.errno == errno.EPERM else "+"
                got[f"{kind} {major}:{minor}"] = verdict
            os.write(write, json.dumps(got).encode())
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(data) if data else {"probe": "failed"}


def main() -> int:
    seed, count, work, rootfs = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    runtime = sys.argv[5] if len(sys.argv) > 5 else "runc"
    rng = random.Random(seed)
    nodes, scratch = work / "nodes", work / "mknod"
    nodes.mkdir()
    scratch.mkdir()
    for i, (kind, major, minor) in enumerate(NODES):
        os.mknod(nodes / str(i), (0o20666 if kind == "c" else 0o60666), os.makedev(major, minor))
    parent = Path("/sys/fs/cgroup/gpuhook-filter-diff")
    parent.mkdir(exist_ok=True)
    for n in range(count):
        rules = random_rules(rng)
        cid = f"fdiff-{os.getpid()}-{n}"
        spec = oci_config(["true"])
        spec["linux"]["resources"]["devices"] = rules
        spec["linux"]["cgroupsPath"] = f"/gpuhook-filter-diff/{cid}"
        bundle = work / cid
        make_bundle(str(bundle), spec, rootfs)
        with open(work / "runc.err", "w") as err:
            created = subprocess.run([runtime, "create", "--bundle", str(bundle), cid], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=err, timeout=30, check=False).returncode
        runc: object = "refused"
        if created == 0:
            runc = probe(parent / cid, nodes, scratch)
            subprocess.run([runtime, "delete", "-f", cid], capture_output=True, timeout=30, check=False)
        try:
            program = runtime_filter.compile_for(spec, runtime, [])
            ours: object = None
        except CgroupError as e:
            ours = f"refused: {e}"
        if ours is None:
            cg = parent / f"gpuhook-{cid}"
            cg.mkdir()
            fd = syscalls.bpf_prog_load(syscalls.BPF_PROG_TYPE_CGROUP_DEVICE, program, "GPL", "")
            dirfd = os.open(cg, os.O_RDONLY | os.O_DIRECTORY)
            try:
                syscalls.bpf_prog_attach(dirfd, fd, syscalls.BPF_CGROUP_DEVICE, 0)
                ours = probe(cg, nodes, scratch)
            finally:
                os.close(dirfd)
                os.close(fd)
            cg.rmdir()
        print(json.dumps({"rules": rules, "runc": runc, "gpuhook": ours}), flush=True)
        subprocess.run(["rm", "-rf", str(bundle)], check=False)
    parent.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
