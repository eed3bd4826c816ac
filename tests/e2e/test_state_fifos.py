"""Every file gpuhook reads of its own is opened non-blocking, regular-file-only and bounded: a FIFO (or a link) put
where a record, the ledger, the config, its cache or config.json is expected never makes the runtime, a hook or gc
wait. Each case finishes well inside its deadline, with one line where it refuses, and no traceback."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from gpuhook.testing.bundle import make_bundle, oci_config

from . import conftest

NV0 = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}
ALLOC = "0123456789abcdef0123456789abcdef"


def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.mkfifo(path, 0o600)


CASES = {  # where the FIFO goes (under state_dir, or the bundle), what the container asks, and whether it starts
    "allocation record": ("allocations/" + ALLOC + ".json", {"gpuhook.dev/allocation": ALLOC}, False),
    "container record": ("containers/other@1.json", {**NV0, "gpuhook.dev/exclusive": "true"}, True),
    "ledger": ("ledger.json", {**NV0, "gpuhook.dev/clocks": "1500"}, False),
    "config.json": ("@bundle/config.json", NV0, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_fifo_never_makes_the_runtime_wait(mixed_host: str, tmp_path: Path, base_rootfs: str, case: str) -> None:
    where, annotations, starts = CASES[case]
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{mixed_host}"\nstate_dir = "{state}"\n')
    bundle = tmp_path / "bundle"
    make_bundle(str(bundle), oci_config(["true"], annotations=annotations), base_rootfs)
    if where.startswith("@bundle/"):
        (bundle / "config.json").unlink()
        _fifo(bundle / "config.json")
    else:
        _fifo(state / where)
    cid = f"fifo-{os.getpid()}-{case.replace(' ', '-').replace('.', '-')}"
    start = time.monotonic()
    done = subprocess.run([conftest.SHIM, "run", "--bundle", str(bundle), cid], capture_output=True, text=True,
                          timeout=60, check=False, stdin=subprocess.DEVNULL,
                          env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
    took = time.monotonic() - start
    subprocess.run(["runc", "delete", "-f", cid], capture_output=True, check=False)
    assert took < 20, f"{case}: {took:.1f} s"
    assert "Traceback" not in done.stderr
    assert (done.returncode == 0) == starts, done.stderr
    if not starts:
        said = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert len(said) == 1, done.stderr


def test_a_fifo_config_is_one_line(tmp_path: Path, base_rootfs: str) -> None:
    config = tmp_path / "config.toml"
    _fifo(config)
    bundle = tmp_path / "bundle"
    make_bundle(str(bundle), oci_config(["true"], annotations=NV0), base_rootfs)
    done = subprocess.run([conftest.SHIM, "run", "--bundle", str(bundle), "fifo-config"], capture_output=True,
                          text=True, timeout=60, check=False,
                          env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
    assert done.returncode == 1 and "not a regular file" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    gc = subprocess.run([conftest.GPUHOOK, "gc"], capture_output=True, text=True, timeout=30, check=False,
                        env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
    assert gc.returncode == 1 and "not a regular file" in gc.stderr
