"""`gpuhook demo`: one real container per vendor through gpuhook-runtime, on the real or a simulated host."""

from __future__ import annotations

import os
import shutil
import sys

from gpuhook.atomic import write_text
from gpuhook.config import load
from gpuhook.configfile import ENV
from gpuhook.errors import GpuhookError
from gpuhook.host.root import Root
from gpuhook.proc import run
from gpuhook.testing.bundle import make_bundle, make_rootfs, oci_config
from gpuhook.testing.simulate import HostSpec, build_host
from gpuhook.vendors.discover import discover
from gpuhook.vendors.registry import sim


def run_demo(work_dir: str) -> int:
    """Run one container per vendor through the shim and print what it sees. Writes under `work_dir`."""
    config = load()
    host_root = config.host_root
    env: dict[str, str] = {}
    if not discover(Root(host_root)).with_gpus():
        host_root = build_host(os.path.join(work_dir, "host"), HostSpec(nvidia=2, amd=2))
        cfg = os.path.join(work_dir, "config.toml")
        write_text(cfg, f'host_root = "{host_root}"\nruntime = "{config.runtime}"\n')
        env[ENV] = cfg
        print(f"no GPUs on this host: using a simulated one at {host_root}")
    elif os.environ.get(ENV):
        env[ENV] = os.environ[ENV]
    shim = _shim()
    base_rootfs = os.path.join(work_dir, "rootfs")
    if not os.path.isdir(base_rootfs):
        make_rootfs(base_rootfs)
    for vendor in (v.vendor for v in discover(Root(host_root)).with_gpus()):
        bundle = os.path.join(work_dir, f"bundle-{vendor}")
        shutil.rmtree(bundle, ignore_errors=True)
        annotations = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor}
        make_bundle(bundle, oci_config(["sh", "-c", sim(vendor).DEMO], annotations=annotations), base_rootfs)
        print(f"\n$ gpuhook-runtime run  (annotations {annotations})")
        try:
            out = run([shim, "run", "--bundle", bundle, f"gpuhook-demo-{vendor}-{os.getpid()}"],
                      timeout=60, extra_env=env)
        except GpuhookError as e:
            print(f"demo container failed: {e}", file=sys.stderr)
            return 1
        print(out.rstrip())
    return 0


def _shim() -> str:
    sibling = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "gpuhook-runtime")
    found = sibling if os.path.exists(sibling) else shutil.which("gpuhook-runtime")
    if not found:
        raise GpuhookError("gpuhook-runtime is not installed next to gpuhook nor on PATH: run ./install.sh")
    return found
