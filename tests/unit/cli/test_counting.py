"""The shim and the prestart hook count what they refuse (by error class) and what they prepare (by vendor), for
the exporter; a config that cannot be read is refused all the same, and not counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuhook.apply import counters
from gpuhook.testing.bundle import oci_config

from ...conftest import FakeHost

HOOK_DIR = str(Path(__file__).parents[3] / "hook")
SHIM = f"import sys; sys.path.insert(0, {HOOK_DIR!r}); from gpuhook.cli.shim import main; main()"
HOOK = f"import sys; sys.path.insert(0, {HOOK_DIR!r}); from gpuhook.cli.admin import main; sys.exit(main())"


def _bundle(tmp_path: Path, annotations: dict[str, str], env: dict[str, str] | None = None) -> Path:
    bundle = tmp_path / "bundle"
    (bundle / "rootfs" / "dev").mkdir(parents=True, exist_ok=True)
    (bundle / "config.json").write_text(json.dumps(oci_config(["true"], env=env, annotations=annotations)))
    return bundle


def _shim(bundle: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SHIM, "create", "--bundle", str(bundle), "c1"], capture_output=True,
                          text=True, timeout=60, check=False,
                          env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})


def test_the_shim_counts_refusals_by_class_and_preparations_by_vendor(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=1, amd=1)
    state = tmp_path / "state"
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{host}"\nruntime = "/bin/true"\nstate_dir = "{state}"\n')
    for gpus in ("banana", "7"):
        assert _shim(_bundle(tmp_path, {"gpuhook.dev/gpus": gpus, "gpuhook.dev/vendor": "nvidia"}), config).returncode
    done = _shim(_bundle(tmp_path, {}, {"NVIDIA_VISIBLE_DEVICES": "all", "AMD_VISIBLE_DEVICES": "all"}), config)
    assert done.returncode == 0, done.stderr
    assert counters.totals(str(state)) == {("refused", "RequestError"): 1, ("refused", "PlanError"): 1,
                                           ("prepared", "nvidia"): 1, ("prepared", "amd"): 1}
    config.write_text(f'host_root = "{host}"\nstate_dir = "{state}"\nruntime = \n')  # not TOML
    assert _shim(_bundle(tmp_path, {"gpuhook.dev/gpus": "banana"}), config).returncode
    assert sum(counters.totals(str(state)).values()) == 4


def test_the_prestart_hook_counts_its_refusals(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=1)
    state = tmp_path / "state"
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{state}"\n')
    bundle = _bundle(tmp_path, {"gpuhook.dev/gpus": "0", "gpuhook.dev/clocks": "fast"})
    stdin = json.dumps({"ociVersion": "1.0.2", "id": "c1", "pid": os.getpid(), "status": "created",
                        "bundle": str(bundle)})
    done = subprocess.run([sys.executable, "-c", HOOK, "hook", "prestart"], input=stdin, capture_output=True,
                          text=True, timeout=60, check=False,
                          env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
    assert done.returncode == 1 and "clocks" in done.stderr
    assert counters.totals(str(state)) == {("refused", "RequestError"): 1}
