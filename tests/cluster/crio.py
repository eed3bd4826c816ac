"""CRI-O 1.36 (built from tools/components' module set) with its CRI on a socket of the test's, everything it keeps
in the test's directory: containers/storage (vfs) with the images loaded by Debian's podman into the same store,
runc under conmon (Debian's), pinns, and gpuhook registered by `gpuhook configure crio`'s drop-in in its config
directory. Yields a tests/e2e/cri_env.CriEnv, as containerd's harness does."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc

from gpuhook.engines.files import configure
from gpuhook.engines.wanted import Wanted
from gpuhook.testing.simulate import HostSpec, build_host
from tests.e2e import cri_env
from tests.e2e.cri_env import BASE_IMAGE, PAUSE_IMAGE, CriEnv
from tests.support.cri_client import CriClient

from .node import components

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def config(d: Path) -> str:
    """crio.conf: every path CRI-O writes under `d`, cgroupfs, runc under conmon, no NRI (its socket would be the
    host's), images only from the local store (a signature policy that accepts them)."""
    return f"""[crio]
root = "{d}/storage"
runroot = "{d}/runroot"
storage_driver = "vfs"
log_dir = "{d}/pod-logs"
version_file = "{d}/crio/version"
version_file_persist = "{d}/crio/version-persist"
clean_shutdown_file = "{d}/crio/clean.shutdown"

[crio.api]
listen = "{d}/crio.sock"
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
pinns_path = "{components() / 'pinns'}"
container_exits_dir = "{d}/crio/exits"
container_attach_socket_dir = "{d}/crio/attach"
namespaces_dir = "{d}/crio/ns"
decryption_keys_path = "{d}/crio/keys"
hooks_dir = ["{d}/hooks.d"]
cdi_spec_dirs = ["{d}/cdi"]

[crio.runtime.runtimes.runc]
runtime_path = "/usr/sbin/runc"
runtime_root = "{d}/runc"
monitor_path = "/usr/bin/conmon"

[crio.image]
pause_image = "{PAUSE_IMAGE}"
signature_policy = "{d}/policy.json"
signature_policy_dir = "{d}/crio/policies"
namespaced_auth_dir = "{d}/crio/auth"

[crio.network]
network_dir = "{d}/cni/conf"
plugin_dirs = ["{d}/cni/bin"]

[crio.nri]
enable_nri = false
"""


def _load_images(d: Path, base_rootfs: str) -> None:
    """The pause and base images into CRI-O's store, by podman (the same containers/storage)."""
    (d / "storage.conf").write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{d}/storage"\n'
                                    f'runroot = "{d}/runroot"\n')
    (d / "containers.conf").write_text(f'[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "none"\n'
                                       f'tmp_dir = "{d}/podman-tmp"\n')
    env = {"PATH": _PATH, "HOME": str(d), "CONTAINERS_STORAGE_CONF": str(d / "storage.conf"),
           "CONTAINERS_CONF": str(d / "containers.conf")}
    for tar, _ in cri_env.write_images(d / "images", base_rootfs):
        done = subprocess.run(["podman", "load", "-i", tar], env=env, capture_output=True, text=True, check=False,
                              timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"podman load {tar} into CRI-O's store: {done.stderr.strip()[-1000:]}")


def _v1_controllers() -> str:
    """/proc/cgroups without the controllers no v1 hierarchy has (hierarchy 0: cgroup2's, or none)."""
    lines = Path("/proc/cgroups").read_text().splitlines(keepends=True)
    return "".join(line for line in lines if line.startswith("#") or line.split()[1:2] != ["0"])


@contextlib.contextmanager
def start(d: Path, base_rootfs: str, shim: str, gpuhook: str, host_spec: HostSpec | None = None,
          gpuhook_extra: str = "", default_gpuhook: bool = False, network: bool = False) -> Iterator[CriEnv]:
    """CRI-O in `d` on a simulated host (2 NVIDIA + 2 AMD GPUs by default), gpuhook's drop-in written by its own
    `configure crio` code (its runtime CRI-O's default if `default_gpuhook`); `network`: a CNI network for pods
    (cri_env.write_cni). Stops it and everything it started on the way out."""
    d.mkdir(parents=True, exist_ok=True)
    for sub in ("conf.d", "cni/conf", "cni/bin", "cdi", "hooks.d", "crio", "pods"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    if network:
        cri_env.write_cni(d / "cni", f"gpuhook-test-{uuid.uuid4().hex[:6]}")
    (d / "policy.json").write_text('{"default": [{"type": "insecureAcceptAnything"}]}')
    host_root = build_host(str(d / "host"), host_spec or HostSpec(nvidia=2, amd=2))
    gpuhook_config, gpuhook_log = d / "gpuhook.toml", d / "gpuhook.log"
    gpuhook_config.write_text(f'host_root = "{host_root}"\nstate_dir = "{d}/gpuhook-state"\n'
                              f'log_file = "{gpuhook_log}"\n' + gpuhook_extra)
    (d / "crio.conf").write_text(config(d))
    configure("crio", str(d / "conf.d/99-gpuhook.toml"), Wanted(shim=shim, gpuhook=gpuhook, config=str(gpuhook_config),
                                                                set_default=default_gpuhook))
    _load_images(d, base_rootfs)
    log = d / "crio.log"
    (d / "cgroups").write_text(_v1_controllers())
    # in a mount namespace of its own (its shm and namespace pins die with it), where /proc/cgroups lists only what
    # this host's v1 hierarchies have: CRI-O reads it to decide which limits runc sets, and on this host hugetlb is
    # bound to cgroup2, where runc (on v1) cannot set the kubelet's hugepage limits
    wrapper = f'mount --bind {d}/cgroups /proc/cgroups && exec "$@"'
    with open(log, "ab") as out:
        proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", wrapper, "crio",
                                 str(components() / "crio"), "--config", str(d / "crio.conf"), "--config-dir",
                                 str(d / "conf.d")], env={"PATH": _PATH}, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    socket = str(d / "crio.sock")
    client = CriClient(socket)
    env = CriEnv(client, socket, PAUSE_IMAGE, BASE_IMAGE, str(gpuhook_config), host_root, str(log), str(gpuhook_log),
                 d, str(d / "storage"), str(d / "runroot"), d / "pods", (d / "conf.d/99-gpuhook.toml").read_text(),
                 f"/gpuhook-crio-{uuid.uuid4().hex[:8]}", f"{d}/runroot/vfs-containers/{{id}}/userdata")
    try:
        try:
            client.wait_ready(30, alive=lambda: proc.poll() is None)
        except grpc.RpcError as e:
            raise env.fail(f"CRI-O's CRI did not answer Version (CRI-O {proc.poll() or 'runs'})", e) from e
        yield env
    finally:
        _teardown(env, proc)


def _teardown(env: CriEnv, proc: subprocess.Popen[bytes]) -> None:
    problems = cri_env.stop_runtime(env, proc, 30)
    stray, left = cri_env.sweep(env)
    if stray:  # conmons and containers CRI-O should have removed with their pods
        problems.append(f"CRI-O left processes behind: {stray}")
    problems += left
    if problems:
        raise RuntimeError("CRI-O teardown: " + "; ".join(problems) + "\n" + env.log_tail(20))
