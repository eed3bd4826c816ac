"""A real kubelet (built from the pinned module sets, tools/components) on a throwaway containerd (Debian's 1.6, or
2.x built from modules) with gpuhook as its default runtime and gpuhook's device plugin registered with it, on a
simulated host. Standalone (no `plane`): its pods are static pods from a manifest directory, admitted by the
kubelet's own device manager (the order of its Allocate calls is the real one). With a control plane
(control_plane.py) it registers its Node and runs what the scheduler binds to it; a CNI network makes its runtime's
network ready. Everything private to one directory; `node()` stops all of it on the way out."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuhook.testing.simulate import HostSpec
from tests.e2e import cri_env
from tests.support import oci_image
from tests.support.cri_client import log_output

from .box import Box, box
from .control_plane import NODE, ControlPlane, feature_gates, stop

REPO = Path(__file__).resolve().parents[2]
KUBELET_DIR = "/var/lib/kubelet"
CLUSTER = '[policy]\nrequests = "allocated"\n[kubernetes]\nhealth_interval = 0.5\n'


KUBERNETES = "1.36"  # the Kubernetes version of the tier (tools/components/kubernetes); the DRA scenarios also run
KUBERNETES_OTHERS = ("1.34", "1.37")  # on these (tools/components/kubernetes-<version>)


def components(kubernetes: str = KUBERNETES) -> Path:
    """The directory holding the components, built once per machine (tools/components/build.sh); with the
    Kubernetes binaries (kubelet, kube-apiserver, kube-controller-manager, kube-scheduler) of `kubernetes`."""
    other = [kubernetes] if kubernetes != KUBERNETES else []
    done = subprocess.run(["bash", str(REPO / "tools/components/build.sh"), *other], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"tools/components/build.sh failed: {done.stderr.strip()[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


@dataclass
class Node:
    d: Path
    env: cri_env.CriEnv
    manifests: Path
    kubelet_log: Path
    plugin_log: Path
    kubelet_argv: list[str]
    procs: dict[str, subprocess.Popen[bytes]]
    plugin_argv: list[str]
    plugin_env: dict[str, str]

    def stop_plugin(self) -> None:
        stop(self.procs["plugin"])

    def start_plugin(self) -> None:
        """gpuhook's device plugin again, in the kubelet's mount namespace (as its DaemonSet pod would come back)."""
        with open(self.plugin_log, "ab") as log:
            self.procs["plugin"] = subprocess.Popen(
                ["nsenter", "-t", str(self.procs["kubelet"].pid), "-m", "--", *self.plugin_argv], env=self.plugin_env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def restart_kubelet(self) -> None:
        """Stop the kubelet (SIGTERM) and start it again in the same mount namespace, as systemd restarts it:
        it removes the plugins' sockets, and each plugin must notice and register again."""
        old = self.procs["kubelet"]
        os.killpg(old.pid, signal.SIGTERM)
        old.wait(15)
        with open(self.kubelet_log, "ab") as log:
            self.procs["kubelet"] = subprocess.Popen(
                ["nsenter", "-t", str(self.procs["namespace"].pid), "-m", "--", *self.kubelet_argv],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def pod(self, name: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> None:
        """A static pod: the kubelet picks the manifest up and runs it."""
        manifest = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
                    "spec": {"restartPolicy": "Never", "hostNetwork": True, **spec}}  # no CNI on this node
        tmp = self.manifests / f".{name}.json"
        tmp.write_text(json.dumps(manifest))
        os.replace(tmp, self.manifests / f"{name}.json")

    def remove_pod(self, name: str) -> None:
        (self.manifests / f"{name}.json").unlink(missing_ok=True)

    def containers(self) -> list[Any]:
        """Every container containerd's CRI lists (crictl ps -a's view, over gRPC)."""
        return self.env.client.list_containers()


KUBELET_CONFIG = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: {manifests}
containerRuntimeEndpoint: unix://{socket}
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /
cgroupsPerQOS: true
enableServer: false
readOnlyPort: 0
healthzPort: 0
podLogsDir: {logs}
fileCheckFrequency: 1s
syncFrequency: 2s
evictionHard: {{}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ""
authentication:
  anonymous: {{enabled: true}}
  webhook: {{enabled: false}}
authorization: {{mode: AlwaysAllow}}
"""


@contextlib.contextmanager
def node(d: Path, base_rootfs: str, shim: str, gpuhook: str, plane: ControlPlane | None = None,
         containerd: str = "containerd", host_spec: HostSpec | None = None, kubernetes: str = "",
         cdi_dirs: tuple[str, ...] = ()) -> Iterator[Node]:
    """`containerd`: its binary, or "crio" for CRI-O (crio.py); `host_spec`: the simulated host (2 NVIDIA + 2 AMD
    GPUs by default); `kubernetes`: more [kubernetes] keys; `cdi_dirs`: containerd 2's CDI spec directories."""
    if containerd == "crio":
        from . import crio

        runtime = crio.start(d, base_rootfs, shim, gpuhook, host_spec, CLUSTER + kubernetes, default_gpuhook=True,
                             network=plane is not None)
    else:
        runtime = cri_env.start(d, base_rootfs, shim, gpuhook, gpuhook_extra=CLUSTER + kubernetes,
                                default_gpuhook=True, containerd=containerd, network=plane is not None,
                                host_spec=host_spec, cdi_dirs=cdi_dirs)
    with runtime as env:
        argv = kubelet_argv(d, env, plane)
        manifests = d / "manifests"
        plugin_log, kubelet_log = d / "device-plugin.log", d / "kubelet.log"
        genv = {**os.environ, "GPUHOOK_CONFIG": env.gpuhook_config}
        made = not os.path.isdir(KUBELET_DIR)
        os.makedirs(KUBELET_DIR, exist_ok=True)
        # The kubelet's device plugin socket is /var/lib/kubelet/device-plugins whatever --root-dir says: a tmpfs
        # over it in a mount namespace of the kubelet's own, which the plugin joins, keeps the host's untouched.
        private = (f"mount -t tmpfs -o mode=0700 tmpfs {KUBELET_DIR} && mkdir {KUBELET_DIR}/device-plugins && "
                   f'exec "$@"')
        with open(plugin_log, "w") as plog, open(kubelet_log, "w") as klog:
            kproc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", private, "kubelet",
                                      *argv], stdout=klog, stderr=subprocess.STDOUT, start_new_session=True)
            wait_for(lambda: "Creating device plugin registration server" in kubelet_log.read_text(), 30,
                      lambda: f"the kubelet did not start: {kubelet_log.read_text()[-2000:]}")
            plugin_argv = [gpuhook, "device-plugin", "--kubelet-dir", f"{KUBELET_DIR}/device-plugins"]
            pproc = subprocess.Popen(["nsenter", "-t", str(kproc.pid), "-m", "--", *plugin_argv], env=genv,
                                     stdout=plog, stderr=subprocess.STDOUT, start_new_session=True)
            # holds the kubelet's mount namespace, for a kubelet restarted while the plugin is stopped
            holder = subprocess.Popen(["nsenter", "-t", str(kproc.pid), "-m", "--", "sleep", "infinity"],
                                      start_new_session=True)
            procs = {"kubelet": kproc, "plugin": pproc, "namespace": holder}
            try:
                yield Node(d, env, manifests, kubelet_log, plugin_log, argv, procs, plugin_argv, genv)
            finally:
                if plane is not None:  # the API's pods first, while the kubelet is there to end them
                    plane.kubectl("delete", "daemonsets,deployments,pods", "--all", "--all-namespaces",
                                  "--wait", "--timeout", "60s", check=False, timeout=90)
                for f in manifests.iterdir():
                    f.unlink()
                if plane is None:  # a kubelet keeps an API pod's ended sandbox; cri_env's teardown removes those
                    _stop_pods(env)
                for proc in (procs["plugin"], procs["kubelet"], procs["namespace"]):
                    stop(proc)
                _remove_kubepods()
                if made:
                    with contextlib.suppress(OSError):
                        os.rmdir(KUBELET_DIR)


def kubelet_argv(d: Path, env: cri_env.CriEnv, plane: ControlPlane | None) -> list[str]:
    """The kubelet's command line, its config (KUBELET_CONFIG, static pods from d/manifests) and directories under
    `d`; registered with `plane` where there is one (its version's kubelet and feature gates). Writes the config,
    makes the directories."""
    for sub in (d / "kubelet" / "device-plugins", d / "manifests", d / "pod-logs"):
        sub.mkdir(parents=True, exist_ok=True)
    config = d / "kubelet.yaml"
    config.write_text(KUBELET_CONFIG.format(manifests=d / "manifests", socket=env.socket, logs=d / "pod-logs"))
    built = plane.bin if plane is not None else components()  # the plane's version, where there is one
    argv = [str(built / "kubelet"), "--config", str(config), "--root-dir", str(d / "kubelet"), "--cert-dir",
            str(d / "pki"), "--hostname-override", NODE, "--v", "2",
            *(plane.gates if plane is not None else feature_gates(built))]
    return argv + (["--kubeconfig", str(plane.kubelet)] if plane is not None else [])


def printed(node_dir: Path, pod: str, container: str) -> list[str]:
    """What a container printed, from the newest of its CRI logs under the node's pod-logs (`pod`: the log
    directory's <namespace>_<pod name> prefix); nothing before it has one."""
    files = sorted((node_dir / "pod-logs").glob(f"{pod}_*/{container}/*.log"))
    return log_output(str(files[-1])).splitlines() if files else []


def wait_for(ready: Any, timeout: float, why: Any) -> None:
    """Until `ready()`; RuntimeError with `why()` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(why())
        time.sleep(0.2)


def _stop_pods(env: cri_env.CriEnv, timeout: float = 30) -> None:
    """Wait for the kubelet to end the static pods it ran (their manifests are gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and env.client.list_pod_sandboxes():
        time.sleep(0.5)


def _remove_kubepods() -> None:
    """The kubelet's cgroups (kubepods and its QoS children), empty once its pods are gone."""
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        top = hierarchy / "kubepods"
        if top.is_dir():
            for d in sorted(top.rglob("*"), key=lambda p: -len(p.parts)):
                if d.is_dir():
                    with contextlib.suppress(OSError):
                        d.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()


INSTALLER_IMAGE = "gpuhook.test/installer:1"


def self_contained_build() -> Path:
    """gpuhook's self-contained build of this checkout for this machine (packaging/build-bundle.sh; its runtime
    is cached by key, so a build after the first takes under a minute)."""
    done = subprocess.run(["bash", str(REPO / "packaging/build-bundle.sh")], capture_output=True, text=True,
                          check=False, timeout=1800, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"packaging/build-bundle.sh failed: {done.stderr.strip()[-3000:]}")
    return REPO / done.stdout.strip().splitlines()[-1]


def installer_image(out: Path) -> Path:
    """The DaemonSet's image as packaging/kubernetes/Dockerfile.installer makes it: the self-contained build at
    /opt/gpuhook and a static busybox with its applets (sh, cp, sed, nsenter, ...), nothing else (no C library, no
    Python). The archive's path."""
    rootfs = out / "installer-rootfs"
    for d in ("bin", "dev", "proc", "sys", "tmp", "etc", "run", "var", "opt"):
        (rootfs / d).mkdir(parents=True)
    busybox = shutil.which("busybox") or "/bin/busybox"
    shutil.copy2(busybox, rootfs / "bin/busybox")
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (rootfs / "bin" / applet).symlink_to("busybox")
    shutil.copytree(self_contained_build(), rootfs / "opt/gpuhook", symlinks=True)
    tar = out / "installer.tar"
    oci_image.write_archive(str(rootfs), str(tar), INSTALLER_IMAGE, cmd=["/opt/gpuhook/bin/gpuhook", "--version"],
                            env={"PATH": "/opt/gpuhook/bin:/usr/sbin:/usr/bin:/sbin:/bin"})
    return tar


@dataclass
class InstalledNode:
    """A node gpuhook is not on yet: containerd without gpuhook and a kubelet, in a bare box (box.py: no Python,
    compiler or package manager, a read-only /usr) for the DaemonSet to install gpuhook onto."""

    d: Path
    env: cri_env.CriEnv
    box: Box
    kubelet_log: Path
    engine_config: bytes  # containerd's config.toml before the DaemonSet came


@contextlib.contextmanager
def installed_node(d: Path, base_rootfs: str, plane: ControlPlane, containerd: str = "containerd",
                   cdi_dirs: tuple[str, ...] = ()) -> Iterator[InstalledNode]:
    d.mkdir(parents=True, exist_ok=True)
    tar = installer_image(d)
    with box(d / "box", bare=True) as b:
        etc_containerd = d / "box" / "paths" / "etc-containerd"
        with cri_env.start(d, base_rootfs, "", "", register=False, network=True, containerd=containerd,
                           spawn=b.spawner("containerd"), config_file=etc_containerd / "config.toml",
                           config_at="/etc/containerd/config.toml",
                           more_images=[(str(tar), INSTALLER_IMAGE)], cdi_dirs=cdi_dirs) as env:
            kubelet_log = d / "kubelet.log"
            b.spawner("kubelet")(kubelet_argv(d, env, plane), dict(os.environ), kubelet_log)
            try:
                yield InstalledNode(d, env, b, kubelet_log, (etc_containerd / "config.toml").read_bytes())
            finally:
                plane.kubectl("delete", "daemonsets,deployments,pods", "--all", "--all-namespaces",
                              "--wait", "--timeout", "60s", check=False, timeout=90)
                b.services["kubelet"].stop()
        _remove_kubepods()
