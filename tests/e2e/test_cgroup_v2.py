"""cgroup v2: the device filter swap on a real kernel, and GPU containers of real runc and crun in v2 cgroups.

The containers run in a private mount namespace with cgroup2 over /sys/fs/cgroup (conftest.CGROUP2), where the
runtime attaches its own eBPF device filter: in hook mode gpuhook replaces it, in shim mode the runtime builds it
from the spec. On fake nodes an allowed open fails with ENXIO (no driver), a denied one with EPERM.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhook import syscalls
from gpuhook.apply import cgroup_v2, device_filter
from gpuhook.edits import DeviceRule
from gpuhook.testing.bundle import oci_config

from .conftest import CGROUP2, RUNTIMES, Run

ALLOWED, DENIED = "No such device or address", "Operation not permitted"


# ---- the swap, on a scratch cgroup -------------------------------------------------------------------------------

@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A new cgroup in the v2 hierarchy (mounted here for the test, unmounted after), removed after the test."""
    mnt = tmp_path / "cgroup2"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "cgroup2", "none", str(mnt)], check=True)
    cg = mnt / f"gpuhook-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        cg.mkdir()
        yield cg
    finally:
        for _ in range(100):  # the probe's process leaves the cgroup when it is reaped
            try:
                cg.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.fixture
def nodes(tmp_path: Path) -> Path:
    """Fake device nodes: two GPUs (195:0, 195:1) and the real /dev/null's numbers (1:3)."""
    d = tmp_path / "nodes"
    d.mkdir()
    for name, minor_major in (("gpu0", (195, 0)), ("gpu1", (195, 1)), ("null", (1, 3))):
        os.mknod(d / name, 0o20666, os.makedev(*minor_major))
        os.chmod(d / name, 0o666)
    return d


def _opens(cg: Path, nodes: Path) -> dict[str, str]:
    """What a process in cgroup `cg` gets opening each node: ok, or the error."""
    script = 'echo $$ > "$0/cgroup.procs" || exit 9; for n; do cat "$n" 2>&1 && echo "$n: ok"; done'
    done = subprocess.run(["sh", "-c", script, str(cg), *sorted(map(str, nodes.iterdir()))], capture_output=True,
                          text=True, check=False, timeout=10)
    assert done.returncode != 9, done.stderr
    return {Path(line.split(": ")[-2].split(" ")[-1]).name: line.rsplit(": ", 1)[1]
            for line in done.stdout.splitlines()}


def _attach_runtime_filter(cg: Path, flags: int) -> None:
    """A filter like the runtime's (its own rules, the GPUs denied), attached as the runtime attaches it."""
    program = device_filter.compile_rules(device_filter.container_rules(oci_config(["x"]), "runc", []))
    fd = syscalls.bpf_prog_load(syscalls.BPF_PROG_TYPE_CGROUP_DEVICE, program, "GPL", "")
    dirfd = os.open(cg, os.O_RDONLY | os.O_DIRECTORY)
    try:
        syscalls.bpf_prog_attach(dirfd, fd, syscalls.BPF_CGROUP_DEVICE, flags)
    finally:
        os.close(dirfd)
        os.close(fd)


GPU0 = device_filter.compile_rules(device_filter.container_rules(oci_config(["x"]), "runc", [DeviceRule("c", 195, 0)]))


@pytest.mark.parametrize(("flags", "programs"), [
    (syscalls.BPF_F_ALLOW_MULTI, 1),  # runc's and crun's: swapped with BPF_F_REPLACE
    (syscalls.BPF_F_ALLOW_MULTI, 2),  # two filters (systemd's and the runtime's): attach, then detach both
    (0, 1),  # attached without flags: one program at most, replaced by attaching with the same flags
    (syscalls.BPF_F_ALLOW_OVERRIDE, 1),
], ids=["multi-one", "multi-two", "exclusive", "override"])
def test_swap_keeps_the_attach_flags_and_leaves_only_the_new_filter(scratch: Path, nodes: Path, flags: int,
                                                                    programs: int) -> None:
    for _ in range(programs):
        _attach_runtime_filter(scratch, flags)
    assert _opens(scratch, nodes) == {"gpu0": DENIED, "gpu1": DENIED, "null": "ok"}
    swap = cgroup_v2.replace_filter(str(scratch), GPU0)
    assert swap is not None and len(swap.old) == programs and swap.new not in swap.old
    new = swap.new
    assert cgroup_v2.attached(str(scratch)) == (flags, [new])
    assert _opens(scratch, nodes) == {"gpu0": ALLOWED, "gpu1": DENIED, "null": "ok"}
    fd = syscalls.bpf_prog_get_fd_by_id(new)
    try:
        assert syscalls.bpf_prog_info(fd) == (syscalls.BPF_PROG_TYPE_CGROUP_DEVICE, new, device_filter.NAME)
    finally:
        os.close(fd)


def test_a_cgroup_without_a_filter_is_left_alone(scratch: Path, nodes: Path) -> None:
    assert cgroup_v2.replace_filter(str(scratch), GPU0) is None
    assert cgroup_v2.attached(str(scratch)) == (0, [])
    assert _opens(scratch, nodes) == {"gpu0": ALLOWED, "gpu1": ALLOWED, "null": "ok"}


# ---- containers -------------------------------------------------------------------------------------------------

# what the container is given (1 of 2 GPUs) and the other GPU's nodes, which the test makes in the image
WANT = {"nvidia": (["/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"], [("nvidia0", 195, 0)]),
        "amd": (["/dev/dri/renderD129", "/dev/dri/card2", "/dev/kfd"], [("renderD128", 226, 128), ("card1", 226, 1)])}
DEFAULTS = ("null", "zero", "full", "random", "urandom")
# where the runtimes' own implicit rules differ: runc allows tun (10:200), crun the console (5:1); the filter
# gpuhook puts in place must keep the runtime's, as the runtime's own does in shim mode
IMPLICIT = {"runc": {"tun": True, "console": False}, "crun": {"tun": False, "console": True}}
SCRIPT = ('for n in "$@" /other/* /dev/tty; do cat "$n" 2>&1 | head -c 200 | sed "s/^/OPEN /"; done; '
          'for n in /implicit/*; do (: < "$n") 2>/dev/null && echo "OPENED $n"; done; '
          'for d in ' + " ".join(DEFAULTS) + '; do head -c 1 /dev/$d 2>&1 | wc -c | sed "s/^/DEV $d /"; done; '
          'echo written > /dev/null && echo "DEV null-write ok"; cat /proc/self/cgroup | grep "^0::"')


def _other_gpu(vendor: str):  # type: ignore[no-untyped-def]
    def edit(rootfs: Path) -> None:
        (rootfs / "other").mkdir()
        (rootfs / "implicit").mkdir()
        for folder, name, major, minor in [*(("other", *n) for n in WANT[vendor][1]), ("implicit", "tun", 10, 200),
                                           ("implicit", "console", 5, 1)]:
            os.mknod(rootfs / folder / name, 0o20666, os.makedev(major, minor))
            os.chmod(rootfs / folder / name, 0o666)
    return edit


def _in_v2(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CGROUP2, *argv], capture_output=True, text=True, check=False, timeout=30)


def _gone(prog_id: int, timeout: float = 10) -> bool:
    """Whether program `prog_id` is freed (the kernel releases a cgroup's programs shortly after the cgroup)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.close(syscalls.bpf_prog_get_fd_by_id(prog_id))
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def _filters(log: Path) -> list[dict[str, object]]:
    """The device filter swaps the hook logged."""
    return [e for e in map(json.loads, log.read_text().splitlines()) if e.get("event") == "device filter"]


@pytest.mark.parametrize("vendor", ["nvidia", "amd"])
@pytest.mark.parametrize("mode", ["hook", "shim"])
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_gpu_container_in_a_v2_cgroup(mixed_host: str, run_container: Run, tmp_path: Path, runtime: str, mode: str,
                                      vendor: str) -> None:
    given, other = WANT[vendor]
    r = run_container(mixed_host, SCRIPT, {"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": vendor}, mode=mode,
                      runtime=runtime, cgroup2=True, image_edit=_other_gpu(vendor),
                      spec_edit=lambda spec: spec["process"]["args"].extend(["sh", *given]))
    assert r.rc == 0, r.err
    opens = {line.split("open '")[1].split("'")[0]: line for line in r.out.splitlines() if "can't open '" in line}
    for node in given:  # the driver's check, past the cgroup's
        assert ALLOWED in opens.get(node, ""), r.out
    for name, _, _ in other:
        assert DENIED in opens.get(f"/other/{name}", ""), r.out
    implicit = {name: f"OPENED /implicit/{name}" in r.out for name in ("tun", "console")}  # open, not read
    assert implicit == IMPLICIT[runtime], r.out
    devs = {p[1]: p[2] for line in r.out.splitlines() if (p := line.split())[:1] == ["DEV"]}
    assert devs == {"null": "0", "zero": "1", "full": "1", "random": "1", "urandom": "1", "null-write": "ok"}, r.out
    assert ALLOWED in opens["/dev/tty"]  # no controlling terminal, but not refused by the filter
    (cgroup,) = [line[3:] for line in r.out.splitlines() if line.startswith("0::/")]
    # afterwards: the container's cgroup is gone, and with it every filter (gpuhook's own in hook mode)
    assert _in_v2("test", "-e", f"/sys/fs/cgroup{cgroup}").returncode == 1
    swaps = _filters(tmp_path / "gpuhook.log")
    assert len(swaps) == (1 if mode == "hook" else 0)
    for swap in swaps:  # the runtime's filter was there, and gpuhook's took its place
        assert swap["cgroup"] == f"/sys/fs/cgroup{cgroup}" and len(swap["old"]) == 1  # type: ignore[arg-type]
        assert _gone(swap["new"]) and _gone(swap["old"][0])  # type: ignore[arg-type,index]
