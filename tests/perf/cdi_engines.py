"""The CDI path as bench.py measures it (#46 item 4): engines that read CDI themselves, given gpuhook's CDI specs
(`gpuhook cdi generate` of the simulated host, in a private spec directory), with no shim in front. Each engine has
a row without a device, the floor of its own rows, and one per vendor asking for GPU 0:

- containerd 2 (tools/components' v2.4.2: private root, state and socket, its CRI with CDI on and only the private
  spec directory), driven over CRI as a kubelet drives it: a pod sandbox made once per row, then per sample a
  container created (the device asked by the `cdi.k8s.io/` annotation), started, waited for and removed;
- Podman (Debian's 4.3: private --root and --runroot, vfs, cgroupfs): `podman run --rm` with `--device
  nvidia.com/gpu=0` or `amd.com/gpu=0`. Podman 4.3 reads specs only from /etc/cdi and /var/run/cdi, so it runs
  (through nsenter) in a mount namespace of the benchmark's own, held by a sleeping process, where the private
  directory is bound over /run/cdi (the host's specs there are neither read nor touched).

Not part of the test run (tests/installed/test_perf_tools.py runs them for two rounds and checks the rows)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CONTAINERD = "CDI: containerd 2 (CRI)"  # the rows' name prefixes; "<prefix>, no device" is each engine's floor
PODMAN = "CDI: Podman run --rm"
NO_DEVICE = ", no device"
DEVICES = {"nvidia": "nvidia.com/gpu=0", "amd": "amd.com/gpu=0"}
# what a row's first (untimed) container checks instead of running `true`: it sees its device, or none
PROBES = {None: "! test -e /dev/nvidia0 && ! test -e /dev/kfd", "nvidia.com/gpu=0": "test -c /dev/nvidia0",
          "amd.com/gpu=0": "test -c /dev/dri/renderD128 && test -c /dev/kfd"}
IMAGE = "localhost/gpuhook-bench:latest"

Sampler = Callable[[], float]  # one timed sample, in seconds; raises RuntimeError with the engine's words
Row = tuple[str, list[str], Sampler]  # name, what runs it (for the table), the sampler


def write_specs(gpuhook: str, config: Path, specs: Path, warm_socket: str = "") -> str | None:
    """gpuhook's CDI specs of the config's host, NVIDIA's and AMD's, into `specs` (cdiVersion as `gpuhook cdi
    generate` picks it for this host's engines), their hooks told the benchmark's warm helper (`warm_socket`; on a
    host they find it at its default socket); what went wrong, or None. Runs gpuhook."""
    specs.mkdir(parents=True, exist_ok=True)
    for vendor in DEVICES:
        path = specs / f"gpuhook-{vendor}.json"
        done = subprocess.run([gpuhook, "cdi", "generate", "--vendor", vendor, "--output", str(path)],
                              env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)},
                              capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            return f"gpuhook cdi generate --vendor {vendor} failed: {done.stderr.strip()[-300:]}"
        if warm_socket:
            tell_warm(path, warm_socket)
    return None


def tell_warm(path: Path, socket: str) -> None:
    """The hooks of gpuhook's CDI spec at `path` told the benchmark's warm helper at `socket` (a host's hooks find
    it at its default socket). Rewrites the file."""
    spec = json.loads(path.read_text())
    devices = spec.get("devices") or []
    for edits in [spec.get("containerEdits") or {}, *((d.get("containerEdits") or {}) for d in devices)]:
        for hook in edits.get("hooks") or []:
            hook["env"] = [*hook.get("env", []), f"GPUHOOK_WARM_SOCKET={socket}"]
    path.write_text(json.dumps(spec, indent=2))


@contextlib.contextmanager
def containerd_rows(containerd: str, work: Path, rootfs: Path, specs: Path) -> Iterator[list[Row]]:
    """containerd 2 with CRI on `specs` (cri_env.start, nothing of gpuhook registered), a sandbox per row made
    here; yields the rows; removes the sandboxes and stops containerd on the way out."""
    sys.path.insert(0, str(REPO))
    from tests.e2e import cri_env  # grpc and the CRI client: only with --cdi

    with cri_env.start(work, str(rootfs), shim="", gpuhook="", containerd=containerd, register=False,
                       cdi_dirs=[str(specs)], ready_timeout=60) as env:
        rows: list[Row] = []
        for suffix, device in ((NO_DEVICE, None), *((f", {d}", d) for d in DEVICES.values())):
            name = f"{CONTAINERD}{suffix}"
            log_dir = env.pod_logs / f"row{len(rows)}"
            log_dir.mkdir(parents=True)
            sandbox, config = env.client.run_pod(f"bench-{len(rows)}", "runc", log_dir=str(log_dir),
                                                 cgroup_parent=env.cgroup_parent)
            rows.append((name, ["containerd"], _cri_sampler(env, sandbox, config, device)))
        yield rows


def _cri_sampler(env: Any, sandbox: str, config: Any, device: str | None) -> Sampler:
    """One container in `sandbox` per call: CreateContainer (the CDI device by annotation), StartContainer, its
    status polled every 2 ms until it exited, RemoveContainer; the seconds it took. The first checks what it
    sees (PROBES)."""
    from tests.support.cri import cri_pb2

    client = env.client
    annotations = {"cdi.k8s.io/gpuhook-bench": device} if device else {}
    count = iter(range(1 << 30))

    def sample() -> float:
        n = next(count)
        name = f"c{n}"
        command = ["true"] if n else ["sh", "-c", PROBES[device]]
        start = time.perf_counter()
        cid = client.create_container(sandbox, config, name, env.image, command=command,
                                      annotations=annotations, log_path=f"{name}.log")
        client.start_container(cid)
        deadline = start + 30
        while (status := client.container_status(cid).status).state != cri_pb2.CONTAINER_EXITED:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"container {cid} did not exit within 30 s")
            time.sleep(0.002)
        client.remove_container(cid)
        took = time.perf_counter() - start
        if status.exit_code != 0:
            raise RuntimeError(f"the container's {command[-1]!r} ended with {status.exit_code}: {status.message}")
        return took

    return sample


@contextlib.contextmanager
def podman_rows(work: Path, rootfs: Path, specs: Path) -> Iterator[list[Row]]:
    """Podman in a mount namespace where `specs` is /run/cdi (an empty /run/cdi made on the host where it is
    missing) and /etc/cdi, if the host has one, is empty; its storage under `work`, the image made of `rootfs`;
    yields the rows; removes its containers and ends the namespace on the way out."""
    work.mkdir(parents=True)
    empty = work / "empty"
    empty.mkdir()
    binds = f'mkdir -p /run/cdi && mount --bind "{specs}" /run/cdi' + (
        f' && mount --bind "{empty}" /etc/cdi' if os.path.isdir("/etc/cdi") else "")
    holder = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                               f"{binds} && echo ready && exec sleep infinity"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        if holder.stdout is None or holder.stdout.readline() != b"ready\n":  # it ended: its stderr says why
            said = holder.stderr.read().decode(errors="replace").strip() if holder.stderr else ""
            raise RuntimeError(f"no mount namespace for Podman's CDI directory: {said}")
        ns = holder.pid
        base = ["podman", "--root", str(work / "storage"), "--runroot", str(work / "run"), "--storage-driver",
                "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime", "runc"]
        try:
            tar = work / "rootfs.tar"
            subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tar), "."], check=True)
            _podman(ns, [*base, "import", str(tar), IMAGE])
            yield [(f"{PODMAN}{suffix}", ["podman"], _podman_sampler(ns, base, device))
                   for suffix, device in ((NO_DEVICE, None), *((f" --device {d}", d) for d in DEVICES.values()))]
        finally:
            with contextlib.suppress(RuntimeError):
                _podman(ns, [*base, "rm", "-af"])
    finally:
        holder.kill()
        holder.wait()


def _podman_sampler(ns: int, base: list[str], device: str | None) -> Sampler:
    """`podman run --rm` of `true` per call, the device asked by --device; the first checks what it sees
    (PROBES)."""
    argv = [*base, "run", "--rm", "--net", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
            *(["--device", device] if device else []), IMAGE]
    count = iter(range(1 << 30))

    def sample() -> float:
        command = ["true"] if next(count) else ["sh", "-c", PROBES[device]]
        start = time.perf_counter()
        _podman(ns, [*argv, *command])
        return time.perf_counter() - start

    return sample


def _podman(ns: int, argv: list[str]) -> None:
    """`argv` run by nsenter in the mount namespace held by the process `ns` (both Podman rows pay its exec
    alike); RuntimeError with its stderr unless it exits 0."""
    done = subprocess.run(["nsenter", f"--mount=/proc/{ns}/ns/mnt", *argv], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[-4:])} failed (exit {done.returncode}): "
                           f"{done.stderr.decode(errors='replace').strip()[-500:]}")
