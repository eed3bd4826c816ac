"""A one-node cluster's control plane, every part built from tools/components' pinned module sets: etcd,
kube-apiserver (certificates and the service-account key made here by openssl), kube-controller-manager and
kube-scheduler; kubectl is the client. All of it private to one directory and to loopback ports picked free;
`control_plane()` stops it and leaves nothing behind.

Trust as kubeadm lays it out, smaller: one CA; the API server's serving certificate; the kubelet's client
certificate as `system:node:<node>` in `system:nodes` (the Node authorizer and NodeRestriction apply to it); one
`system:masters` client for kubectl, the controller-manager and the scheduler (kubeadm gives those two their own
names; nothing here depends on it)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NODE = "gpuhook-node"
SERVICE_RANGE = "10.96.0.0/24"


@dataclass
class ControlPlane:
    d: Path
    bin: Path  # the components' directory
    server: str  # https://127.0.0.1:<port>
    admin: Path  # kubectl's kubeconfig (system:masters)
    kubelet: Path  # the kubelet's kubeconfig (system:node:<NODE>)
    gates: list[str] = field(default_factory=list)  # the components' --feature-gates (the kubelet's too)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.bin / "kubectl"), "--kubeconfig", str(self.admin), *args], input=stdin,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr.strip()}\n{self.logs_tail()}")
        return done

    def apply(self, *objects: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                            "items": list(objects)}))

    def get(self, kind: str, name: str = "", namespace: str | None = "default") -> Any:
        """The object as JSON (namespace None: a cluster-scoped kind)."""
        where = ["-n", namespace] if namespace else []
        return json.loads(self.kubectl("get", kind, *([name] if name else []), *where, "-o", "json").stdout)

    def logs_tail(self, lines: int = 15) -> str:
        out = []
        for name in self.procs:
            with contextlib.suppress(OSError):
                text = (self.d / f"{name}.log").read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {name} ---\n" + "\n".join(text))
        return "\n".join(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {done.stderr.strip()}")


def make_pki(pki: Path) -> None:
    """ca, apiserver (serving), admin and kubelet (clients), sa (the service-account signing key): EC P-256."""
    pki.mkdir(mode=0o700, parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=gpuhook-test-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=pki)
    leaves = {
        "apiserver": ("/CN=kube-apiserver", "serverAuth",
                      "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,"
                      "DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"),
        "admin": ("/O=system:masters/CN=kubernetes-admin", "clientAuth", ""),
        "kubelet": (f"/O=system:nodes/CN=system:node:{NODE}", "clientAuth", ""),
    }
    for name, (subject, usage, san) in leaves.items():
        ext = pki / f"{name}.ext"
        ext.write_text(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                       f"extendedKeyUsage={usage}\n{san}\n")
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=pki)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", ext.name, "-out", f"{name}.crt", cwd=pki)
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def kubeconfig(path: Path, server: str, pki: Path, user: str) -> Path:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "test",
              "clusters": [{"name": "test", "cluster": {"server": server,
                                                        "certificate-authority": str(pki / "ca.crt")}}],
              "users": [{"name": user, "user": {"client-certificate": str(pki / f"{user}.crt"),
                                                "client-key": str(pki / f"{user}.key")}}],
              "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}]}
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def _wait(ready: Any, timeout: float, what: str, plane: ControlPlane) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        for name, proc in plane.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode} while waiting for {what}\n{plane.logs_tail(40)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s\n{plane.logs_tail(40)}")
        time.sleep(0.3)


# What each minor version turns on beyond its defaults, in every component (kube-apiserver, -controller-manager,
# -scheduler and the kubelet share one gate registry, k8s.io/kubernetes/pkg/features), and the API versions its
# server serves beyond the default ones. Each DRA feature gpuhook's tests use is on where the version has it
# (alpha or beta); a gate that is GA and locked is left out (its only value is the default), and one the version
# does not know is never named (the component would refuse to start):
#   1.34: DRAExtendedResource, DRADeviceTaints (DeviceTaintRule in resource.k8s.io/v1alpha3),
#         DRAPartitionableDevices, DRAConsumableCapacity, DRADeviceBindingConditions alpha; DRAAdminAccess,
#         DRAPrioritizedList beta (on by default)
#   1.36: DRAExtendedResource, DRADeviceTaints, DRAPartitionableDevices, DRAConsumableCapacity,
#         DRADeviceBindingConditions beta (on by default); DRADeviceTaintRules beta, off by default as its
#         resource.k8s.io/v1beta2 API is; DRAAdminAccess, DRAPrioritizedList GA
#   1.37: DRAExtendedResource, DRADeviceTaints, DRADeviceTaintRules (resource.k8s.io/v1), DRAPrioritizedList GA;
#         DRAPartitionableDevices, DRAConsumableCapacity, DRADeviceBindingConditions beta (on by default)
FEATURE_GATES: dict[int, tuple[str, ...]] = {
    34: ("DRAExtendedResource", "DRADeviceTaints", "DRAPartitionableDevices", "DRAConsumableCapacity",
         "DRADeviceBindingConditions", "DRAAdminAccess", "DRAPrioritizedList"),
    36: ("DRAExtendedResource", "DRADeviceTaints", "DRADeviceTaintRules", "DRAPartitionableDevices",
         "DRAConsumableCapacity", "DRADeviceBindingConditions"),
    37: ("DRADeviceTaints", "DRADeviceTaintRules", "DRAPartitionableDevices", "DRAConsumableCapacity",
         "DRADeviceBindingConditions"),
}
RUNTIME_CONFIG: dict[int, str] = {34: "resource.k8s.io/v1alpha3=true", 36: "resource.k8s.io/v1beta2=true", 37: ""}
# Where each version serves DeviceTaintRule (KEP-5055)
DEVICE_TAINT_RULE_API: dict[int, str] = {34: "resource.k8s.io/v1alpha3", 36: "resource.k8s.io/v1beta2",
                                         37: "resource.k8s.io/v1"}


@functools.cache
def kube_minor(components: Path) -> int:
    """The minor version of the Kubernetes binaries in `components` (runs `kube-apiserver --version`)."""
    done = subprocess.run([str(components / "kube-apiserver"), "--version"], capture_output=True, text=True,
                          check=True, timeout=60)
    return int(done.stdout.split()[-1].lstrip("v").split(".")[1])  # "Kubernetes v1.36.3"


def feature_gates(components: Path, without: tuple[str, ...] = ()) -> list[str]:
    """The `--feature-gates` argument (none, where the version needs none) for the components' version, but for
    the gates `without` names (left at the version's default)."""
    gates = [g for g in FEATURE_GATES.get(kube_minor(components), ()) if g not in without]
    return ["--feature-gates", ",".join(f"{g}=true" for g in gates)] if gates else []


_IN_USE = "address already in use"


def _start(plane: ControlPlane, name: str, argv: list[str]) -> None:
    with open(plane.d / f"{name}.log", "wb") as log:
        plane.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _lost_port(plane: ControlPlane, name: str) -> bool:
    """Whether `name` exited because a port picked free was taken before it bound it (then it is forgotten)."""
    proc = plane.procs[name]
    if proc.poll() is None or _IN_USE not in (plane.d / f"{name}.log").read_text(errors="replace"):
        return False
    del plane.procs[name]
    return True


@contextlib.contextmanager
def control_plane(d: Path, components: Path, without: tuple[str, ...] = ()) -> Iterator[ControlPlane]:
    """Serving until the block ends; the feature gates and API versions of FEATURE_GATES and RUNTIME_CONFIG for
    the components' version, but for those `without` names (a cluster as that version has it by default). A port
    picked free that another process takes first makes the component start again on other ports (etcd and the
    API server; the controller-manager and the scheduler serve none)."""
    pki = d / "pki"
    make_pki(pki)
    minor = kube_minor(components)
    gates = feature_gates(components, without)
    plane = ControlPlane(d, components, "", d / "admin.kubeconfig", d / "kubelet.kubeconfig", gates)
    try:
        for attempt in range(5):
            etcd_client, etcd_peer = free_port(), free_port()
            etcd_url = f"http://127.0.0.1:{etcd_client}"
            _start(plane, "etcd", [
                str(components / "etcd"), "--name", "test", "--data-dir", str(d / "etcd"),
                "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
                "--initial-cluster", f"test=http://127.0.0.1:{etcd_peer}", "--unsafe-no-fsync",
                "--log-level", "warn"])
            try:
                _wait(functools.partial(_etcd_healthy, plane, etcd_url), 30, "etcd's /health", plane)
                break
            except RuntimeError:
                if attempt == 4 or not _lost_port(plane, "etcd"):
                    raise
                shutil.rmtree(d / "etcd", ignore_errors=True)
        for attempt in range(5):
            api = free_port()
            plane.server = f"https://127.0.0.1:{api}"
            kubeconfig(plane.admin, plane.server, pki, "admin")
            kubeconfig(plane.kubelet, plane.server, pki, "kubelet")
            runtime_config = RUNTIME_CONFIG.get(minor, "")
            _start(plane, "kube-apiserver", [
                str(components / "kube-apiserver"), "--etcd-servers", etcd_url, "--bind-address", "127.0.0.1",
                "--advertise-address", "127.0.0.1", "--secure-port", str(api), "--cert-dir", str(d / "apiserver"),
                "--tls-cert-file", str(pki / "apiserver.crt"), "--tls-private-key-file", str(pki / "apiserver.key"),
                "--client-ca-file", str(pki / "ca.crt"), "--service-cluster-ip-range", SERVICE_RANGE,
                "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
                "--service-account-key-file", str(pki / "sa.pub"),
                "--service-account-signing-key-file", str(pki / "sa.key"),
                "--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
                "--allow-privileged", "--endpoint-reconciler-type", "none", "--profiling=false", "--v", "1",
                *gates, *(["--runtime-config", runtime_config] if runtime_config else [])])
            try:
                _wait(lambda: _readyz(plane), 90, "the API server's /readyz", plane)
                break
            except RuntimeError:
                if attempt == 4 or not _lost_port(plane, "kube-apiserver"):
                    raise
        # --secure-port 0: no HTTPS server, so no port to pick (nothing here asks their /healthz)
        for name in ("kube-controller-manager", "kube-scheduler"):
            extra = (["--service-account-private-key-file", str(pki / "sa.key"), "--root-ca-file",
                      str(pki / "ca.crt"), "--use-service-account-credentials"]
                     if name == "kube-controller-manager" else [])
            _start(plane, name, [str(components / name), "--kubeconfig", str(plane.admin), "--leader-elect=false",
                                 "--secure-port", "0", *extra, *gates, "--profiling=false", "--v", "1"])
        _wait(lambda: plane.kubectl("get", "serviceaccount", "default", check=False).returncode == 0, 60,
              "the default service account (the controller-manager's)", plane)
        yield plane
    finally:
        for name in reversed(list(plane.procs)):
            stop(plane.procs[name])


def _etcd_healthy(plane: ControlPlane, url: str) -> bool:
    """etcd answers on `url`, and it is ours (alive: one that found the port taken exits)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
            healthy = json.loads(answer.read()).get("health") == "true"
    except (OSError, ValueError):
        return False
    time.sleep(0.2)
    return healthy and plane.procs["etcd"].poll() is None


def _readyz(plane: ControlPlane) -> bool:
    """The API server answers ready, and it is ours (alive: one that found the port taken exits)."""
    try:
        ready = plane.kubectl("get", "--raw", "/readyz", check=False, timeout=10).stdout.strip() == "ok"
    except subprocess.TimeoutExpired:
        return False
    return ready and plane.procs["kube-apiserver"].poll() is None


def stop(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM to the process's group, SIGKILL after `timeout`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
