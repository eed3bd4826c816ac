"""Slim ROCm images: image size and container start-up, with ROCm in the image vs gpuhook.dev/host-rocm.

    .venv/bin/python tests/perf/slim_rocm.py [--rocm-gb 4] [--rounds 20]     (as root)

A simulated AMD host carries ROCm 6.2.1 with a multi-GB kernel library (a sparse file: its size counts, its
blocks cost nothing). The "fat" image carries the same tree in /opt/rocm-6.2.1; the "slim" image carries no
ROCm and asks for the host's. Sizes are the files' sizes; start-up is real `runc run` through the shim,
the two variants interleaved. Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hook"))

from gpuhook.cli.launcher import write_launchers  # noqa: E402
from gpuhook.testing.bundle import make_rootfs, oci_config  # noqa: E402
from gpuhook.testing.simulate import HostSpec, build_host  # noqa: E402


def tree_size(path: Path) -> int:
    """Bytes of all regular files below `path` (their sizes, as an image layer would carry them)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rocm-gb", type=int, default=4)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpuhook-slim-"))
    try:
        host = build_host(str(work / "host"), HostSpec(amd=1, amd_driver="6.8.5", host_rocm=("6.2.1",),
                                                      rocm_data_mb=args.rocm_gb * 1024))
        shim = write_launchers(str(work), sys.executable, [str(REPO / "hook"), sysconfig.get_paths()["purelib"]])[
            "gpuhook-runtime"]
        config = work / "config.toml"
        config.write_text(f'host_root = "{host}"\nstate_dir = "{work}/state"\n')
        slim_root = work / "slim-rootfs"
        make_rootfs(str(slim_root))
        fat_root = work / "fat-rootfs"
        shutil.copytree(slim_root, fat_root, symlinks=True)
        (fat_root / "opt").mkdir()
        subprocess.run(["cp", "-a", "--sparse=always", f"{host}/opt/rocm-6.2.1", str(fat_root / "opt")], check=True)
        os.symlink("rocm-6.2.1", fat_root / "opt/rocm")
        amd = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"}
        variants = {
            "ROCm in the image": (fat_root, amd),
            "slim image + gpuhook.dev/host-rocm=true": (slim_root, {**amd, "gpuhook.dev/host-rocm": "true"}),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        bundles = {}
        for i, (name, (rootfs, ann)) in enumerate(variants.items()):
            bundle = work / f"b{i}"
            bundle.mkdir()
            spec = oci_config(["/opt/rocm/bin/rocminfo"], annotations=ann)
            spec["root"] = {"path": str(rootfs), "readonly": False}  # the prepared tree, used in place
            bundles[name] = (bundle, json.dumps(spec).encode())
        env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)}
        for r in range(args.rounds + 1):
            for name, (bundle, spec) in bundles.items():
                (bundle / "config.json").write_bytes(spec)
                start = time.perf_counter()
                done = subprocess.run([shim, "run", "--bundle", str(bundle), f"slim-{os.getpid()}-{r}"], env=env,
                                      capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    sys.exit(f"{name}: {done.stderr.strip()}")
                if r:  # the first round warms caches
                    times[name].append(time.perf_counter() - start)
        print(f"host ROCm tree: {tree_size(Path(host) / 'opt/rocm-6.2.1') / 2**30:.2f} GiB; rounds: {args.rounds}\n")
        print("| image | image size | container start (median ms) |")
        print("|---|---:|---:|")
        for name, (rootfs, _) in variants.items():
            size = tree_size(rootfs)
            shown = f"{size / 2**30:.2f} GiB" if size > 2**30 else f"{size / 2**20:.1f} MiB"
            print(f"| {name} | {shown} | {statistics.median(times[name]) * 1000:.1f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
