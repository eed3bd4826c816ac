"""A throwaway containerd with its CRI plugin, driven over CRI gRPC as a kubelet would: pods on the `runc`
handler and on `gpuhook`, the latter registered by the project's own `gpuhook configure containerd` code
(gpuhook.engines.containerd.edit), on a simulated host (2 NVIDIA + 2 AMD GPUs).

Everything is private to one directory: containerd's root, state, sockets, config, log, the images (a static
`pause` built here and the tests' busybox rootfs), pod logs, gpuhook's config and state. `start()` is a
context manager; it yields a CriEnv and leaves no sandbox, shim process or mount behind."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc

from gpuhook.engines import containerd as containerd_engine
from gpuhook.engines.wanted import Wanted
from gpuhook.testing.simulate import HostSpec, build_host
from tests.support import oci_image
from tests.support.cri_client import CriClient, CriDevice, CriMount, log_output, rpc_error_details

NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin works in
PAUSE_IMAGE = "gpuhook.test/pause:1"
BASE_IMAGE = "gpuhook.test/base:1"
TASKS = "io.containerd.runtime.v2.task"  # where bundles live under containerd's state dir
RUNC_ROOT = f"/run/containerd/runc/{NAMESPACE}"  # the runc v2 shim's default runc --root for the namespace

PAUSE_C = r"""
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = quit;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = reap;
    sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);
    for (;;)
        pause();
}
"""


class CriError(AssertionError):
    """A CRI call or a pod failed; the message carries containerd's log tail."""


@dataclass
class PodRun:
    """What run_to_completion saw: the ids, the container's exit code, output and status, and the OCI specs."""

    sandbox_id: str
    container_id: str
    exit_code: int
    output: str
    status: Any  # cri_pb2.ContainerStatus
    log_path: str  # the container's CRI log file
    sandbox_spec: dict[str, Any] = field(default_factory=dict)
    container_spec: dict[str, Any] = field(default_factory=dict)


@dataclass
class CriEnv:
    """A running containerd with the CRI plugin: the client, its socket, the images, gpuhook's config."""

    client: CriClient
    socket: str  # containerd's gRPC socket (CRI and containerd's own API), for `ctr -a`
    pause_image: str
    image: str  # the busybox workload image (tests' base_rootfs)
    gpuhook_config: str  # GPUHOOK_CONFIG of containerd (and so of the shims and gpuhook-runtime)
    host_root: str  # the simulated host gpuhook sees
    log: str  # containerd's stdout and stderr
    gpuhook_log: str  # gpuhook's log_file
    dir: Path  # everything else lives under it
    root: str  # containerd's root
    state: str  # containerd's state
    pod_logs: Path  # pods' log_directory go under it
    config_text: str  # containerd's config.toml as rendered (with the gpuhook runtime)
    cgroup_parent: str  # the pods' cgroup parent (cgroupfs path), removed at teardown
    bundles: str = ""  # a container's bundle directory, {id} for its id (containerd's task directory if empty)

    def log_tail(self, lines: int = 60) -> str:
        """The last lines of containerd's log (and gpuhook's), for assertion messages."""
        parts = []
        for title, path in (("containerd", self.log), ("gpuhook", self.gpuhook_log)):
            with contextlib.suppress(OSError):
                text = Path(path).read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {title} log ({path}) ---\n" + "\n".join(text))
        return "\n".join(parts)

    def fail(self, what: str, error: BaseException | None = None) -> CriError:
        """A CriError for `what` (with the RPC's details) and the logs' tails."""
        detail = f": {rpc_error_details(error)}" if error is not None else ""
        return CriError(f"{what}{detail}\n{self.log_tail()}")

    def bundle_spec(self, container_id: str) -> dict[str, Any]:
        """The OCI config.json in the container's bundle (as gpuhook-runtime left it), while its task exists."""
        bundle = self.bundles or f"{self.state}/{TASKS}/{NAMESPACE}/{{id}}"
        path = Path(bundle.format(id=container_id)) / "config.json"
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded

    def run_to_completion(self, script: str, handler: str = "runc", pod_annotations: Mapping[str, str] | None = None,
                          annotations: Mapping[str, str] | None = None, envs: Mapping[str, str] | None = None,
                          image: str | None = None, name: str | None = None, timeout: float = 30.0,
                          keep_specs: bool = False, command: Sequence[str] | None = None,
                          devices: Sequence[CriDevice] = (), mounts: Sequence[CriMount] = ()) -> PodRun:
        """A pod on `handler` with one container running `sh -c script` until it exits; the pod is removed
        after. keep_specs: the script should `sleep` a little at its end, so the bundles' config.json can be read
        while the container runs (both read from the bundles, as gpuhook-runtime left them)."""
        name = name or f"pod-{uuid.uuid4().hex[:8]}"
        log_dir = self.pod_logs / name
        log_dir.mkdir(parents=True, exist_ok=True)
        try:
            sandbox_id, config = self.client.run_pod(name, handler, uid=uuid.uuid4().hex, annotations=pod_annotations,
                                                     log_dir=str(log_dir), cgroup_parent=self.cgroup_parent)
        except grpc.RpcError as e:
            raise self.fail(f"RunPodSandbox {name} on handler {handler!r}", e) from e
        try:
            try:
                cid = self.client.create_container(sandbox_id, config, "work", image or self.image,
                                                   command=list(command or ["sh", "-c", script]), envs=envs,
                                                   annotations=annotations, log_path="work.log",
                                                   devices=devices, mounts=mounts)
                self.client.start_container(cid)
            except grpc.RpcError as e:
                raise self.fail(f"CreateContainer/StartContainer in {name} on handler {handler!r}", e) from e
            sandbox_spec: dict[str, Any] = {}
            container_spec: dict[str, Any] = {}
            if keep_specs:
                sandbox_spec = self.bundle_spec(sandbox_id)
                with contextlib.suppress(OSError):
                    container_spec = self.bundle_spec(cid)
            try:
                status = self.client.wait_exited(cid, timeout)
            except (grpc.RpcError, TimeoutError) as e:
                raise self.fail(f"container of {name} did not finish", e) from e
            log_path = str(log_dir / "work.log")
            return PodRun(sandbox_id, cid, status.exit_code, log_output(log_path), status, log_path, sandbox_spec,
                          container_spec)
        finally:
            self.remove_pod(sandbox_id)

    def remove_pod(self, sandbox_id: str) -> None:
        """StopPodSandbox + RemovePodSandbox."""
        try:
            self.client.stop_pod_sandbox(sandbox_id)
            self.client.remove_pod_sandbox(sandbox_id)
        except grpc.RpcError as e:
            raise self.fail(f"removing sandbox {sandbox_id}", e) from e


def write_images(images: Path, base_rootfs: str) -> list[tuple[str, str]]:
    """The pause image (build_pause) and the base image of `base_rootfs` as OCI archives under `images`; their
    (archive, name)."""
    build_pause(images / "pause-rootfs")
    oci_image.write_archive(str(images / "pause-rootfs"), str(images / "pause.tar"), PAUSE_IMAGE,
                            entrypoint=["/pause"])
    oci_image.write_archive(base_rootfs, str(images / "base.tar"), BASE_IMAGE, cmd=["sh"])
    return [(str(images / "pause.tar"), PAUSE_IMAGE), (str(images / "base.tar"), BASE_IMAGE)]


def build_pause(rootfs: Path) -> None:
    """/pause, a static C binary that waits for SIGTERM/SIGINT (exits 0) and reaps children."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("the CRI e2e tests need a C compiler (apt-get install gcc libc6-dev)")
    rootfs.mkdir(parents=True, exist_ok=True)
    source = rootfs.parent / "pause.c"
    source.write_text(PAUSE_C)
    subprocess.run([cc, "-static", "-O2", "-o", str(rootfs / "pause"), str(source)], check=True,
                   capture_output=True, timeout=60)
    for d in ("dev", "proc", "sys", "etc"):
        (rootfs / d).mkdir(exist_ok=True)


def _head(version: int, d: Path, socket: str) -> str:
    """What both config versions begin with: the private root, state, sockets and opt directory."""
    return f"""version = {version}
root = "{d}/root"
state = "{d}/state"
oom_score = 0

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
"""


def base_config(d: Path, socket: str, cni: Path) -> str:
    """containerd's config.toml (version 2) before gpuhook registers itself: private root/state/socket, CRI on
    the native snapshotter with our pause image, a `runc` runtime, no AppArmor, no CNI config (host network),
    oom_score_adj no lower than containerd's own (a sandbox's -998 needs CAP_SYS_RESOURCE, which a CI container
    may lack)."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return _head(2, d, socket) + f"""
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_tls_streaming = false
  max_container_log_line_size = 16384
  restrict_oom_score_adj = true

[{cri}.cni]
  bin_dir = "{cni}/bin"
  conf_dir = "{cni}/conf"

[{cri}.containerd]
  snapshotter = "native"
  default_runtime_name = "runc"
  disable_snapshot_annotations = true

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
"""


def base_config_v3(d: Path, socket: str, cni: Path) -> str:
    """The same for containerd 2 (config version 3: the CRI plugin split into images and runtime), CDI on as
    containerd 2 has it by default."""
    images, runtime = "plugins.'io.containerd.cri.v1.images'", "plugins.'io.containerd.cri.v1.runtime'"
    return _head(3, d, socket) + f"""
[{images}]
  snapshotter = "native"
  disable_snapshot_annotations = true

[{images}.pinned_images]
  sandbox = "{PAUSE_IMAGE}"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_tls_streaming = false

[{runtime}]
  disable_apparmor = true
  enable_selinux = false
  max_container_log_line_size = 16384
  restrict_oom_score_adj = true

[{runtime}.cni]
  bin_dirs = ["{cni}/bin"]
  conf_dir = "{cni}/conf"

[{runtime}.containerd]
  default_runtime_name = "runc"

[{runtime}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
"""


def write_cni(cni: Path, name: str) -> None:
    """A CNI network for the pods that are not on the host's network (and so the node's runtime reports its
    network ready): Debian's ptp and host-local plugins (containernetworking-plugins), a veth per pod with an
    address from a private /24; its leases under `cni`, nothing on the host beyond each pod's veth."""
    for plugin in ("ptp", "host-local", "loopback", "portmap"):
        link = cni / "bin" / plugin
        if not link.exists():
            link.symlink_to(f"/usr/lib/cni/{plugin}")
    conflist = {"cniVersion": "1.0.0", "name": name, "plugins": [
        {"type": "ptp", "ipMasq": False, "ipam": {"type": "host-local", "dataDir": str(cni / "ipam"),
                                                  "ranges": [[{"subnet": "10.213.7.0/24"}]]}},
        {"type": "portmap", "capabilities": {"portMappings": True}, "snat": False}]}
    (cni / "conf" / "10-gpuhook-test.conflist").write_text(json.dumps(conflist))


def _mounts_under(prefix: str) -> list[str]:
    """Mount points at or under `prefix`, deepest first."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == prefix or point.startswith(prefix.rstrip("/") + "/"):
                found.append(point)
    return sorted(set(found), key=len, reverse=True)


def _shims_of(socket: str) -> list[int]:
    """Pids of containerd-shim processes started for this containerd (its -address on their command line)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and b"containerd-shim" in argv[0] and socket.encode() in argv:
            pids.append(int(entry))
    return pids


def _cgroup_dirs(parent: str) -> list[Path]:
    """The cgroup `parent` in every hierarchy that has it (v1: one per controller; v2: one)."""
    base = Path("/sys/fs/cgroup")
    tops = [base / parent.lstrip("/")] + [h / parent.lstrip("/") for h in base.iterdir() if h.is_dir()]
    return [top for top in tops if top.is_dir()]


def _cgroup_pids(parent: str) -> list[int]:
    """Processes in the cgroup `parent` or under it, in any hierarchy."""
    pids: set[int] = set()
    for top in _cgroup_dirs(parent):
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in procs.read_text().split())
    return sorted(pids)


def _remove_cgroups(parent: str) -> list[Path]:
    """rmdir the cgroup `parent` (and what runc left under it) in every hierarchy, v1 or v2; those still there."""
    tops = _cgroup_dirs(parent)
    for top in tops:
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: len(w[0]), reverse=True):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)
    return [top for top in tops if top.is_dir()]


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (those wait for whoever reaps orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Those of `pids` still alive after up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    pids = [p for p in pids if _alive(p)]
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = [p for p in pids if _alive(p)]
    return pids


class Proc(Protocol):
    """What start() needs of containerd's process: subprocess.Popen's, or a service manager's stand-in."""

    pid: int

    def poll(self) -> int | None: ...
    def send_signal(self, sig: int) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


Spawn = Callable[[list[str], dict[str, str], Path], Proc]


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> Proc:
    with open(log, "ab") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _ctr(socket: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ctr", "-a", socket, "-n", NAMESPACE, *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


@contextlib.contextmanager
def start(d: Path, base_rootfs: str, shim: str, gpuhook: str, host_spec: HostSpec | None = None,
          ready_timeout: float = 30.0, gpuhook_extra: str = "", default_gpuhook: bool = False,
          containerd: str = "containerd", network: bool = False, register: bool = True,
          spawn: Spawn | None = None, config_file: Path | None = None, config_at: str | None = None,
          more_images: Sequence[tuple[str, str]] = (), cdi_dirs: Sequence[str] = (),
          registration: Callable[[str, Wanted], str] | None = None) -> Iterator[CriEnv]:
    """containerd with CRI in `d`, the gpuhook runtime registered for `shim` (gpuhook-runtime) and `gpuhook`
    (the hook binary; containerd's default runtime if `default_gpuhook`), both images imported; yields a CriEnv;
    stops everything on the way out. `containerd`: the binary (Debian's 1.6 by default; a 2.x one takes a version 3
    config, and its own runc shim from beside it); `network`: a CNI network for pods (write_cni). For a node whose
    gpuhook is installed by its DaemonSet: `register=False` leaves gpuhook out of containerd's config and its env,
    `spawn` starts containerd (as the node's service manager would), `config_file` is where its config is written and
    `config_at` the path containerd is told (where that is bound in the node's mount namespace); `more_images`:
    (OCI archive, name) to import too; `cdi_dirs`: containerd 2's CDI spec directories (instead of /etc/cdi and
    /var/run/cdi); `registration(config, wanted)`: the config containerd reads, from the one before gpuhook (by
    default `gpuhook configure containerd`'s edit of config.toml; a k3s template's way in tests/cluster)."""
    d.mkdir(parents=True, exist_ok=True)
    socket = str(d / "containerd.sock")
    cni = d / "cni"
    for sub in ("bin", "conf"):
        (cni / sub).mkdir(parents=True, exist_ok=True)
    host_root = build_host(str(d / "host"), host_spec or HostSpec(nvidia=2, amd=2))
    gpuhook_config = d / "gpuhook.toml"
    gpuhook_log = d / "gpuhook.log"
    gpuhook_config.write_text(f'host_root = "{host_root}"\nstate_dir = "{d}/gpuhook-state"\n'
                              f'log_file = "{gpuhook_log}"\n' + gpuhook_extra)
    if network:
        write_cni(cni, f"gpuhook-test-{uuid.uuid4().hex[:6]}")
    version = subprocess.run([containerd, "--version"], capture_output=True, text=True, check=True).stdout
    config = base_config_v3 if " v2." in version or " 2." in version else base_config
    text = config(d, socket, cni)
    if cdi_dirs:
        if config is not base_config_v3:
            raise ValueError("cdi_dirs: containerd 1.6 has no CDI")
        dirs = ", ".join(json.dumps(c) for c in cdi_dirs)
        text = text.replace("  restrict_oom_score_adj = true\n",
                            f"  restrict_oom_score_adj = true\n  enable_cdi = true\n  cdi_spec_dirs = [{dirs}]\n")
    if register:
        text = (registration or containerd_engine.edit)(
            text, Wanted(shim=shim, gpuhook=gpuhook, config=str(gpuhook_config), set_default=default_gpuhook))
    (config_file or d / "containerd.toml").write_text(text)

    archives = [*write_images(d / "images", base_rootfs), *more_images]

    log_path = d / "containerd.log"
    path = os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    if os.sep in containerd:  # its own shim first
        path = f"{os.path.dirname(containerd)}:{path}"
    env = {"PATH": path, **({"GPUHOOK_CONFIG": str(gpuhook_config)} if register else {})}
    argv = [containerd, "--config", config_at or str(d / "containerd.toml")]
    proc = (spawn or _spawn)(argv, env, log_path)
    client = CriClient(socket)
    cri_env = CriEnv(client, socket, PAUSE_IMAGE, BASE_IMAGE, str(gpuhook_config), host_root, str(log_path),
                     str(gpuhook_log), d, str(d / "root"), str(d / "state"), d / "pods", text,
                     f"/gpuhook-e2e-{uuid.uuid4().hex[:8]}")
    try:
        try:
            client.wait_ready(ready_timeout, alive=lambda: proc.poll() is None)
        except grpc.RpcError as e:
            state = "runs" if proc.poll() is None else f"exited {proc.poll()}"
            raise cri_env.fail(f"containerd's CRI did not answer Version within {ready_timeout}s (containerd {state})",
                               e) from e
        for tar, _ in archives:
            r = _ctr(socket, "images", "import", "--snapshotter", "native", tar)
            if r.returncode != 0:
                raise cri_env.fail(f"ctr images import {tar}: {r.stdout}{r.stderr}")
        listed = _ctr(socket, "images", "ls", "-q").stdout.split()
        missing = [name for _, name in archives if name not in listed]
        if missing:
            raise cri_env.fail(f"images {missing} not in containerd after import (it lists {listed})")
        yield cri_env
    finally:
        _teardown(cri_env, proc)


def stop_runtime(env: CriEnv, proc: Proc, grace: float) -> list[str]:
    """Every pod the runtime has stopped and removed over CRI, the client closed, then the runtime stopped
    (SIGTERM, SIGKILL after `grace` seconds); what could not be removed."""
    problems = []
    if proc.poll() is None:
        try:
            for sandbox in env.client.list_pod_sandboxes(timeout=10):
                problem = _remove_sandbox(env.client, sandbox.id)
                if problem:
                    problems.append(f"sandbox {sandbox.id}: {problem}")
        except grpc.RpcError as e:
            problems.append(f"ListPodSandbox: {rpc_error_details(e)}")
    env.client.close()
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    return problems


def _remove_sandbox(client: CriClient, sandbox: str, patience: float = 20) -> str:
    """The sandbox stopped and removed; what stopped it if it could not be ('' once done). A removal another
    client began (a kubelet stopped mid-request: containerd carries the request on) leaves a container "already in
    removing state" for a moment, so a failed attempt is tried again until `patience` runs out."""
    deadline = time.monotonic() + patience
    while True:
        try:
            client.stop_pod_sandbox(sandbox, timeout=30)
            client.remove_pod_sandbox(sandbox, timeout=30)
            return ""
        except grpc.RpcError as e:
            if time.monotonic() >= deadline:
                return rpc_error_details(e)
        time.sleep(0.5)


def _teardown(env: CriEnv, proc: Proc) -> None:
    problems = stop_runtime(env, proc, 20)
    shims = _wait_gone(_shims_of(env.socket), 3)
    for pid in shims:  # a shim outlives containerd by design: a sandbox we could not remove
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if _wait_gone(shims, 5):
        problems.append(f"shims {shims} would not die")
    if shims:  # their containers outlive them: delete those through runc, kill what is left in our cgroups
        tasks = Path(env.state) / TASKS / NAMESPACE
        for bundle in sorted(tasks.iterdir()) if tasks.is_dir() else []:
            subprocess.run(["runc", "--root", RUNC_ROOT, "delete", "--force", bundle.name], capture_output=True,
                           check=False, timeout=15)
    stray, left = sweep(env)
    if stray and not shims:  # containerd removed every sandbox it was asked to: none of theirs may be left
        problems.append(f"container processes {stray} outlived containerd without a shim")
    problems += left
    if problems:
        raise RuntimeError("CRI containerd teardown: " + "; ".join(problems) + "\n" + env.log_tail(20))


def sweep(env: CriEnv) -> tuple[list[int], list[str]]:
    """What a stopped runtime left: the processes in the pods' cgroups killed, its mounts under the test's
    directory unmounted, the cgroups removed; (the processes it killed, what it could not clean)."""
    problems = []
    stray = _cgroup_pids(env.cgroup_parent)
    for pid in stray:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if _wait_gone(stray, 5):
        problems.append(f"processes {stray} would not die")
    for point in _mounts_under(str(env.dir)):
        subprocess.run(["umount", "-R", "-l", point], capture_output=True, check=False, timeout=30)
    deadline = time.monotonic() + 5  # a killed container's cgroup empties a little after its processes die
    while (left_cgroups := _remove_cgroups(env.cgroup_parent)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left_cgroups:
        problems.append(f"cgroups left: {left_cgroups}")
    if left := _mounts_under(str(env.dir)):
        problems.append(f"still mounted: {left}")
    return stray, problems
