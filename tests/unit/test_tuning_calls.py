"""The tuning hooks of a container the shim prepared, as runc runs them (`python -I -S`, the OCI state on stdin): the
prestart hook applies the shim's plan from the container's record with no discovery and no GPU path (no plan, no
facts, no second range check of a value the shim checked), one NVML session for every GPU and setting, the ledger
written once; the poststop hook restores with one session and one write. Counted through the stub NVML (its sessions
and its log) and the modules each hook process loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from gpuhook.apply import containers
from gpuhook.host.processes import start_time
from gpuhook.host.root import Root
from gpuhook.tuning import ledger
from gpuhook.tuning.backends import check_ranges
from gpuhook.vendors.contract import Setting
from gpuhook.vendors.discover import discover

from ..conftest import FakeHost

PATH = [str(Path(__file__).resolve().parents[2] / "hook"), sysconfig.get_paths()["purelib"]]
_HOOK = """
import sys
sys.path[:0] = {path!r}
from gpuhook.cli.admin import main
code = main(['hook', {stage!r}])
print(code, ' '.join(sorted(sys.modules)))
"""
# what a prestart following the shim's plan must not load: the GPU path's plan, facts, discovery of every vendor,
# the config's validation (the shim validated it), contextlib (the NVML binding's session is a class)
_NOT_FOLLOWING = {"gpuhook.gpu_path.inject", "gpuhook.plan.prepare", "gpuhook.host.facts", "gpuhook.vendors.discover",
                  "jsonschema", "contextlib", "argparse"}


def _hook(stage: str, state: dict[str, object], config: Path) -> set[str]:
    done = subprocess.run([sys.executable, "-I", "-S", "-c", _HOOK.format(path=PATH, stage=stage)],
                          input=json.dumps(state), capture_output=True, text=True, check=False,
                          env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
    code, *loaded = done.stdout.split()
    assert code == "0", done.stderr
    return set(loaded)


def test_the_hooks_of_a_planned_container_are_one_short_call_each(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=2)
    state_dir, sim = tmp_path / "state", Path(host) / "var/lib/gpuhook-sim"
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{state_dir}"\n')
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"ociVersion": "1.0.2", "root": {"path": "rootfs"}, "hooks": {
        "poststop": [{"path": "/usr/local/bin/gpuhook-hook", "args": ["gpuhook", "hook", "poststop"]}]}}))
    inv = discover(Root(host)).vendor("nvidia")
    assert inv is not None and inv.driver_version
    settings = tuple(Setting(vendor="nvidia", gpu=g.uuid, index=g.index, pci=g.pci, device=g.uuid, name=n, value=v)
                     for g in inv.gpus for n, v in (("clocks", "1500-1500"), ("power_limit", "400000")))
    check_ranges(Root(host), str(state_dir), settings, {"nvidia": inv.driver_version})  # the shim's check
    assert len((sim / "nvml.inits").read_text().splitlines()) == 1
    me = os.getpid()  # the process that "execs the runtime": the shim's record is alive while it lives
    containers.save(str(state_dir), containers.ContainerRecord(
        id="c1", drivers=(("nvidia", inv.driver_version),), runtime_root=str(tmp_path / "runc"),
        gpus=tuple(g.uuid for g in inv.gpus), creator=me, creator_start=start_time(me), planned=True,
        settings=settings))
    _hook("poststop", {"ociVersion": "1.0.2", "id": "other", "status": "stopped", "bundle": str(bundle)}, config)
    # (the shim validated the config first and remembered it valid: here a first hook of another container does)
    init = subprocess.Popen(["sleep", "60"])  # the container's init
    try:
        oci = {"ociVersion": "1.0.2", "id": "c1", "status": "created", "pid": init.pid, "bundle": str(bundle)}
        loaded = _hook("prestart", oci, config)
        assert not loaded & _NOT_FOLLOWING, loaded & _NOT_FOLLOWING
        assert len((sim / "nvml.inits").read_text().splitlines()) == 2  # one session: 2 GPUs x 2 settings
        log = [ln.split()[0] for ln in (sim / "nvml.log").read_text().splitlines()]
        assert log == ["set-clocks", "set-power"] * 2  # the values the shim checked, not checked again: only sets
        held = ledger.load(str(state_dir / ledger.NAME))
        assert held["seq"] == 4 and all(e["holders"][0]["pid"] == init.pid for e in held["settings"].values())
        assert not (state_dir / "ledger.json.prev").exists() or \
            (state_dir / "ledger.json.prev").read_text() == (state_dir / "ledger.json").read_text()
    finally:
        init.kill()
        init.wait()
    loaded = _hook("poststop", {**oci, "status": "stopped"}, config)
    assert not loaded & _NOT_FOLLOWING
    assert len((sim / "nvml.inits").read_text().splitlines()) == 3
    log = [ln.split()[0] for ln in (sim / "nvml.log").read_text().splitlines()]
    assert log[4:] == ["set-power", "reset-clocks"] * 2
    assert ledger.load(str(state_dir / ledger.NAME))["settings"] == {}
    again = _hook("poststop", {**oci, "status": "stopped"}, config)  # nothing held by it: no session, no write
    assert len((sim / "nvml.inits").read_text().splitlines()) == 3 and "gpuhook.host.nvml_lib" not in again
