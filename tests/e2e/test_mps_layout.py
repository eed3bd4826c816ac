"""MPS clients laid out as NVIDIA's drivers lay them out (issue 45, 6), through the real shim and real runc on a
simulated host: what a client container sees (its mountinfo, its env, the daemon's files) is held to the layout
read from NVIDIA's own sources, and to the daemon's own view of it.

NVIDIA's layout, as its sources have it (NVIDIA/k8s-device-plugin 1b826ac, NVIDIA/k8s-dra-driver-gpu 2240711):
- the device plugin: a per-resource daemon directory <mps root>/<resource>/{pipe,log} (cmd/mps-control-daemon/
  mps/root.go) and a tmpfs of the node's at <mps root>/shm, mounted rw,nosuid,nodev,noexec with a bounded size
  (mount/mount-shm.go); the daemon runs with CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY (mps/daemon.go,
  EnvVars: "should be passed to clients") and that tmpfs at its /dev/shm (the chart's mps-shm volume); a client
  gets the pipe directory, CUDA_MPS_PIPE_DIRECTORY naming it, and the same tmpfs at /dev/shm
  (internal/plugin/mps.go, updateReponse).
- the DRA driver: one daemon a claim, <plugin dir>/mps/<claim uid>/{pipe,shm,log}, shm a tmpfs of its own
  (rw,nosuid,nodev,noexec,size=), the daemon with it at /dev/shm, its pipes at /tmp/nvidia-mps, its logs at
  /var/log/nvidia-mps (templates/mps-control-daemon.tmpl.yaml); a client's CDI edits: CUDA_MPS_PIPE_DIRECTORY=
  /tmp/nvidia-mps, /dev/shm and /tmp/nvidia-mps bound from shm and pipe with rw,nosuid,nodev,bind
  (cmd/gpu-kubelet-plugin/sharing.go, GetCDIContainerEdits); unprepare unmounts shm and removes the directory.

gpuhook: one daemon a GPU, <[tuning] mps_dir>/<UUID>/{pipe,log,shm}, shm a bounded tmpfs of its own whose
directory `shared` is /dev/shm to the daemon and its clients; the client also gets the log directory, read-only.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.simulate import HostSpec

from .conftest import Run
from .test_tuning_runc import MPS, NV0, _daemon, _mps

GPU0, GPU1 = "GPU-00000000-5a1e-4000-8000-0000d00d0000", "GPU-00000001-5a1e-4000-8000-0000d00d0001"
# the client's side of NVIDIA's DRA layout (GetCDIContainerEdits), and the log directory its daemon's template names
PIPE, SHM, LOG = "/tmp/nvidia-mps", "/dev/shm", "/var/log/nvidia-mps"
CLIENT_ENV = {"CUDA_MPS_PIPE_DIRECTORY": PIPE, "CUDA_MPS_LOG_DIRECTORY": LOG}  # daemon.go's EnvVars, as clients see
RW = {"rw", "nosuid", "nodev"}  # sharing.go's client mounts: rw, nosuid, nodev (bind)
TMPFS = {"nosuid", "nodev", "noexec"}  # mount-shm.go and sharing.go's tmpfs: rw, nosuid, nodev, noexec, size=


def _mountinfo(pid: int) -> dict[str, tuple[str, str, set[str], str]]:
    """Mount point (as the process sees it) -> (major:minor, root in its filesystem, options, fs type): the last
    mount on each point, the one the process sees."""
    out = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        f = head.split()
        out[f[4]] = (f[2], f[3], set(f[5].split(",")), tail.split()[0])
    return out


def _environ(pid: int) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in kv)


def _pid(cid: str) -> int:
    state = subprocess.run(["runc", "state", cid], capture_output=True, text=True, check=True).stdout
    return int(state.split('"pid": ')[1].split(",")[0])


def _wait(path: Path) -> str:
    for _ in range(200):
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def test_mps_clients_see_the_daemons_pipes_logs_and_shared_memory_as_nvidia_lays_them_out(tuned) -> None:  # type: ignore[no-untyped-def]
    """Two clients of GPU 0's daemon and one of GPU 1's: each client's /dev/shm is its daemon's tmpfs (the same
    device and inode as the daemon's own /dev/shm, not the runtime's private one), noexec as NVIDIA's; the pipe
    directory read-write at /tmp/nvidia-mps and the log directory read-only at /var/log/nvidia-mps, both in env;
    what one client of a GPU writes to /dev/shm the other sees, and GPU 1's clients and the host do not. The last
    client's stop ends the daemon and unmounts its tmpfs."""
    t = tuned(HostSpec(nvidia=2))
    t.config.write_text(t.config.read_text() + MPS.format(tmp=t.tmp))

    def client(name: str) -> Any:
        def edit(spec: dict[str, Any]) -> None:
            spec["process"]["args"] = ["sh", "-c", (
                f"echo {name} > {SHM}/{name}; "
                f"if touch {LOG}/x 2>/dev/null; then w=writable; else w=read-only; fi; "
                f"echo \"$w $(cat {LOG}/control.log | head -1)\" > {PIPE}/log-{name}; sleep 60")]
        return edit

    first, r1 = t.start({**NV0, "gpuhook.dev/mps": "true"}, client("a"))
    second, r2 = t.start({**NV0, "gpuhook.dev/mps": "true"}, client("b"))
    other, r3 = t.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/mps": "true"},
                        client("c"))
    assert (r1.returncode, r2.returncode, r3.returncode) == (0, 0, 0), (r1.stderr, r2.stderr, r3.stderr)
    home, home1 = _mps(t, GPU0), _mps(t, GPU1)
    daemon, daemon1 = _daemon(home), _daemon(home1)
    assert daemon and daemon1 and daemon != daemon1
    # the host's layout: <mps_dir>/<UUID>/{pipe,log,shm}, shm a tmpfs of the GPU's own, root's alone
    assert sorted(p.name for p in home.iterdir()) == ["log", "pipe", "shm"]
    assert os.stat(home / "shm").st_mode & 0o7777 == 0o700 and os.stat(home / "shm").st_uid == 0
    ours = _mountinfo(os.getpid())[str(home / "shm")]
    assert ours[3] == "tmpfs" and ours[2] >= TMPFS
    # the daemon: its /dev/shm is the GPU's tmpfs (a mount namespace of its own), as NVIDIA's daemon container has it
    shown = _mountinfo(daemon)[SHM]
    assert (shown[0], shown[1], shown[3]) == (ours[0], "/shared", "tmpfs")
    assert _environ(daemon)["CUDA_MPS_PIPE_DIRECTORY"] == f"{home}/pipe"
    assert _environ(daemon)["CUDA_MPS_LOG_DIRECTORY"] == f"{home}/log"
    assert not Path("/dev/shm/cuda.mps.control").exists()  # the host's own /dev/shm is not the daemon's
    for cid, name, their, gpu_home in ((first, "a", daemon, home), (second, "b", daemon, home),
                                       (other, "c", daemon1, home1)):
        pid = _pid(cid)
        mounts, env = _mountinfo(pid), _environ(pid)
        shm = mounts[SHM]
        assert (shm[0], shm[1], shm[3]) == (_mountinfo(their)[SHM][0], "/shared", "tmpfs"), (name, shm)
        assert shm[2] >= TMPFS | RW, shm
        seen, theirs = os.stat(f"/proc/{pid}/root{SHM}"), os.stat(f"/proc/{their}/root{SHM}")
        assert (seen.st_dev, seen.st_ino) == (theirs.st_dev, theirs.st_ino)  # the daemon's shm, inode for inode
        assert mounts[PIPE][2] >= RW and "ro" in mounts[LOG][2], (mounts[PIPE], mounts[LOG])
        assert {k: env.get(k) for k in CLIENT_ENV} == CLIENT_ENV
        assert Path(f"/proc/{pid}/root{SHM}/cuda.mps.control").read_text().split()[1] == f"{gpu_home}/pipe"
        assert {"control", "nvidia-cuda-mps-control.pid"} <= set(os.listdir(f"/proc/{pid}/root{PIPE}"))
        said = _wait(gpu_home / "pipe" / f"log-{name}")
        assert said.startswith("read-only started for GPU-"), said  # the daemon's control.log, read-only
    _wait(home / "shm/shared/b")
    assert sorted(os.listdir(f"/proc/{_pid(first)}/root{SHM}")) == ["a", "b", "cuda.mps.control"]  # shared
    assert sorted(os.listdir(home1 / "shm/shared")) == ["c", "cuda.mps.control"]  # and no other GPU's
    t.stop(first)
    t.stop(second)
    assert not _daemon(home) and not home.exists()
    assert not any(p.startswith(str(home)) for p in _mountinfo(os.getpid()))  # its tmpfs unmounted
    assert _daemon(home1) == daemon1
    t.stop(other)
    assert not home1.exists()


@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_a_dra_claims_mps_client_gets_the_daemons_shared_memory_on_the_shim_and_on_plain_runc(
        run_container: Run, mixed_host: str, tmp_path: Path, mode: str) -> None:
    """A claim prepared as an MPS client (its GpuConfig's mps, or the node's sharing): on gpuhook's shim the spec
    carries the mounts; on plain runc (the claim's CDI spec's env, as containerd applies it, and its marker hooks)
    the prestart hook mounts them live, over the runtime's own /dev/shm. Either way the client, a non-root user,
    writes to the daemon's tmpfs at /dev/shm and reads its pipes and logs."""
    from .test_dra_claims_runc import POD, _markers, _prepared

    state = tmp_path / "state"
    _prepared(state, mixed_host, (1,), tuning=(("mps", "true"), ("mps-threads", "25")))
    text = (f'host_root = "{mixed_host}"\nstate_dir = "{state}"\nlog_file = "{tmp_path / "gpuhook.log"}"\n'
            f'[policy]\nrequests = "allocated"\n[tuning]\nmps_dir = "{tmp_path / "mps"}"\n')
    (tmp_path / "node.toml").write_text(text)
    markers = _markers(tmp_path, "gpu")

    def edit(spec: dict[str, Any]) -> None:
        markers(spec)
        spec["process"]["env"] += [f"{k}={v}" for k, v in CLIENT_ENV.items()]  # the claim's CDI env

    script = (f"echo $(id -u) > {SHM}/client && ls {SHM} {PIPE} {LOG}; grep -E ' ({SHM}|{PIPE}|{LOG}) ' "
              "/proc/self/mountinfo")
    r = run_container(mixed_host, script, annotations=POD, config=text, spec_edit=edit, mode=mode)
    assert r.rc == 0, r.err
    mounts = {ln.split()[4]: ln for ln in r.out.splitlines() if " - " in ln}
    shm = mounts[SHM]  # the last /dev/shm line: the mount the client sees
    assert shm.split()[3] == "/shared" and " - tmpfs " in shm and set(shm.split()[5].split(",")) >= TMPFS, shm
    assert {"client", "cuda.mps.control", "control", "control.log"} <= set(r.out.split()), r.out
    assert "ro" in mounts[LOG].split()[5].split(",") and "rw" in mounts[PIPE].split()[5].split(",")
    assert not (tmp_path / "mps").exists() or not any((tmp_path / "mps").iterdir())  # its stop: nothing left
