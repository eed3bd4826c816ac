"""A simulated host with its own gpuhook config, and containers run through the shim on it: the e2e tier's tuning
tests share it (conftest.py's `tuned` fixture makes them)."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

from gpuhook.testing.bundle import make_bundle, oci_config
from gpuhook.testing.simulate import HostSpec, build_host

from . import conftest


class Tuned:
    """A simulated host, a config and helpers to run containers through the shim."""

    def __init__(self, tmp: Path, base_rootfs: str, spec: HostSpec, policy: str = "") -> None:
        self.tmp, self.base = tmp, base_rootfs
        self.host = build_host(str(tmp / "host"), spec)
        self.config = tmp / "config.toml"
        self.config.write_text(f'host_root = "{self.host}"\nstate_dir = "{tmp}/state"\nlog_file = "{tmp}/log"\n'
                               + policy)
        self.env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(self.config)}
        self.started: list[str] = []

    def bundle(self, annotations: dict[str, str], args: list[str], edit: Any = None) -> Path:
        b = self.tmp / f"b-{uuid.uuid4().hex[:8]}"
        spec = oci_config(args, annotations=annotations)
        if edit:
            edit(spec)
        make_bundle(str(b), spec, self.base)
        return b

    def start(self, annotations: dict[str, str], edit: Any = None) -> tuple[str, subprocess.CompletedProcess[str]]:
        """A detached container running `sleep 60`."""
        cid = "t-" + uuid.uuid4().hex[:10]
        b = self.bundle(annotations, ["sleep", "60"], edit)
        r = _run_detached(conftest.SHIM, b, cid, self.env)
        self.started.append(cid)
        return cid, r

    def stop(self, cid: str) -> None:
        conftest.stop_container(cid, tries=50)

    def gpuhook(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([conftest.GPUHOOK, *args], env=self.env, capture_output=True, text=True, check=False)

    def nvml(self) -> dict[int, list[int]]:
        text = Path(f"{self.host}/var/lib/gpuhook-sim/nvml").read_text()
        return {int(f[0]): [int(x) for x in f[1:]] for f in (ln.split() for ln in text.splitlines())}

    def log(self, stub: str) -> list[str]:
        path = Path(f"{self.host}/var/lib/gpuhook-sim/{stub}.log")
        return [ln.split()[0] for ln in path.read_text().splitlines()] if path.exists() else []


def _run_detached(shim: str, bundle: Path, cid: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`run -d` with the container's stdio on /dev/null and our stderr in a file (a pipe would stay open)."""
    err = bundle / "stderr"
    with open(err, "w") as f:
        rc = subprocess.run([shim, "run", "-d", "--bundle", str(bundle), cid], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=f, timeout=60, check=False).returncode
    return subprocess.CompletedProcess([], rc, "", err.read_text())
