"""The DRA driver's cost on a node with 16 simulated GPUs (8 NVIDIA, 8 AMD; run as root): NodePrepareResources
latency as the kubelet sees it (one claim of one GPU, over the real gRPC socket: the claim read from the API server,
its CDI spec and records written), NodeUnprepareResources likewise, the time from start to serving, and the
driver's memory. The API server is a small HTTPS stand-in on loopback (with a CA and a bearer token, as the real
one is reached) that answers the claim and takes the slices: what is timed is the driver's own work and one HTTPS
GET per claim.

    .venv/bin/python tests/perf/dra_driver.py [--claims 200] [--installed PREFIX/bin]

Not part of the test run. docs/kubernetes.md has the figures.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import ssl
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hook"))

import grpc  # noqa: E402

from gpuhook.cli.launcher import write_launchers  # noqa: E402
from gpuhook.kubernetes.api import dra_pb2, dra_pb2_grpc  # noqa: E402
from gpuhook.testing.simulate import HostSpec, build_host  # noqa: E402

NODE = "perf-node"
DRIVER = "gpu.gpuhook.dev"


def _claim(name: str) -> dict[str, Any]:
    n = int(name.rsplit("-", 1)[1])
    device = f"gpu-{n % 8}" if n % 2 == 0 else f"amdgpu-{128 + n % 8}"
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device}]}},
                "reservedFor": [{"resource": "pods", "name": f"pod-{n}", "uid": f"pod-{n}"}]}}


class _Api(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps connections open, as the API server does
    disable_nagle_algorithm = True  # headers and body written apart must not wait on a delayed ACK
    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != "Bearer perf-token":
            self._answer(401, {"message": "Unauthorized"})
        elif "/resourceclaims/" in self.path:
            self._answer(200, _claim(self.path.rsplit("/", 1)[1]))
        elif self.path.startswith("/apis/resource.k8s.io/v1/resourceslices"):
            self._answer(200, {"items": []})
        else:
            self._answer(200, {"metadata": {"name": NODE, "uid": "node-uid"}})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.published = time.monotonic()  # type: ignore[attr-defined]
        self._answer(201, {})

    def log_message(self, *_: Any) -> None:
        pass


def _api(work: Path) -> tuple[http.server.HTTPServer, str]:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(work / "key.pem"), "-out", str(work / "cert.pem"), "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(work / "cert.pem"), str(work / "key.pem"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"https://127.0.0.1:{server.server_address[1]}"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--claims", type=int, default=200)
    p.add_argument("--installed", metavar="BINDIR", help="gpuhook as installed there (install.sh's PREFIX/bin)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuhook-dra-perf-") as tmp:
        work = Path(tmp)
        host = build_host(str(work / "host"), HostSpec(nvidia=8, amd=8))
        server, url = _api(work)
        kubeconfig = work / "kubeconfig.json"
        kubeconfig.write_text(json.dumps({
            "current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "clusters": [{"name": "c", "cluster": {"server": url, "certificate-authority": str(work / "cert.pem")}}],
            "users": [{"name": "u", "user": {"token": "perf-token"}}]}))
        config = work / "config.toml"
        config.write_text(f'host_root = "{host}"\nstate_dir = "{work / "state"}"\n[kubernetes]\nhealth_interval = 1\n')
        if args.installed:
            gpuhook = os.path.join(args.installed, "gpuhook")
        else:
            (work / "bin").mkdir()
            gpuhook = write_launchers(str(work / "bin"), sys.executable,
                                      [str(REPO / "hook"), sysconfig.get_paths()["purelib"]])["gpuhook"]
        socket = work / "plugins" / DRIVER / "dra.sock"
        started = time.monotonic()
        proc = subprocess.Popen([gpuhook, "dra-driver", "--node-name", NODE, "--kubeconfig", str(kubeconfig),
                                 "--kubelet-plugins-dir", str(work / "plugins"), "--kubelet-registry-dir",
                                 str(work / "registry"), "--cdi-dir", str(work / "cdi")],
                                env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)},
                                stderr=subprocess.PIPE, text=True)
        try:
            while not socket.exists() or not hasattr(server, "published"):
                if proc.poll() is not None:
                    print(proc.stderr.read() if proc.stderr else "", file=sys.stderr)
                    return 1
                time.sleep(0.005)
            serving = time.monotonic() - started
            published = server.published - started  # type: ignore[attr-defined]
            stub = dra_pb2_grpc.DRAPluginStub(grpc.insecure_channel(f"unix://{socket}"))
            prepare, unprepare = [], []
            for n in range(args.claims):
                claim = dra_pb2.Claim(namespace="default", name=f"claim-{n}", uid=f"uid-claim-{n}")
                t0 = time.perf_counter()
                answer = stub.NodePrepareResources(dra_pb2.NodePrepareResourcesRequest(claims=[claim]))
                prepare.append((time.perf_counter() - t0) * 1000)
                if answer.claims[claim.uid].error:
                    print(answer.claims[claim.uid].error, file=sys.stderr)
                    return 1
                t0 = time.perf_counter()
                stub.NodeUnprepareResources(dra_pb2.NodeUnprepareResourcesRequest(claims=[claim]))
                unprepare.append((time.perf_counter() - t0) * 1000)
            rss = _rss_kib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(10)
            server.shutdown()

    def row(name: str, values: list[float]) -> str:
        q = statistics.quantiles(values, n=10)
        return f"| {name} | {statistics.median(values):.1f} | {q[-1]:.1f} |"

    print(f"machine: {os.cpu_count()} CPUs; {args.claims} claims, one GPU each; "
          f"gpuhook {'as installed in ' + args.installed if args.installed else 'from this checkout'}")
    print("| call | median ms | p90 ms |\n|---|---:|---:|")
    print(row("NodePrepareResources", prepare))
    print(row("NodeUnprepareResources", unprepare))
    print(f"start to serving: {serving * 1000:.0f} ms; to the first slice written: {published * 1000:.0f} ms; "
          f"driver RSS after the calls: {rss / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
