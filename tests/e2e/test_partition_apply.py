"""`gpuhook partition apply`: AMD compute and memory partition modes from a file, on a simulated host whose stub
amd-smi plays the driver re-laying its devices (and, without amd-smi, amdgpu's sysfs files); what containers then
get; refusals while a container uses the GPU, for modes the GPU does not offer, for vendors gpuhook cannot
partition; the node's feature file written anew."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuhook.testing.simulate import HostSpec

from . import conftest
from .test_tuning_runc import Tuned


def _layout(t: Tuned, text: str) -> Path:
    path = t.tmp / "layout.toml"
    path.write_text(text)
    return path


def _mode(t: Tuned, index: int, name: str = "current_compute_partition") -> str:
    return Path(f"{t.host}/sys/devices/pci0000:00/0000:{0x80 + index:02x}:00.0/{name}").read_text().strip()


def _sees(t: Tuned) -> list[str]:
    b = t.bundle({}, ["sh", "-c", "ls /dev/dri | grep render"])
    spec = (b / "config.json").read_text().replace('"env": [', '"env": ["AMD_VISIBLE_DEVICES=all", ', 1)
    (b / "config.json").write_text(spec)
    done = subprocess.run([conftest.SHIM, "run", "--bundle", str(b), "p-" + b.name], env=t.env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_gpu_in_cpx_and_nps4_is_eight_partitions_to_containers(tmp_path: Path, base_rootfs: str) -> None:
    t = Tuned(tmp_path, base_rootfs, HostSpec(amd=2))
    features = tmp_path / "features"
    features.write_text("old\n")
    layout = _layout(t, '[[amd]]\ngpus = [1]\ncompute = "CPX"\nmemory = "NPS4"\n')
    dry = t.gpuhook("partition", "apply", str(layout), "--dry-run")
    assert dry.returncode == 0 and "would put AMD GPU 0000:81:00.0 in compute CPX, memory NPS4" in dry.stdout
    assert _mode(t, 1) == "SPX" and _sees(t) == ["renderD128", "renderD129"]
    done = t.gpuhook("partition", "apply", str(layout), "--labels", str(features))
    assert done.returncode == 0, done.stderr
    assert "AMD GPU 0000:81:00.0: memory NPS1 -> NPS4, compute SPX -> CPX" in done.stdout
    assert _mode(t, 1) == "CPX" and _mode(t, 1, "current_memory_partition") == "NPS4" and _mode(t, 0) == "SPX"
    assert _sees(t) == [f"renderD{n}" for n in range(128, 137)]  # GPU 0, and GPU 1's eight partitions
    assert "gpuhook-amd.partitions=8" in features.read_text()
    again = t.gpuhook("partition", "apply", str(layout))
    assert again.returncode == 0 and "already compute CPX, memory NPS4" in again.stdout


def test_a_gpu_a_container_uses_is_refused_and_left_alone(tmp_path: Path, base_rootfs: str) -> None:
    t = Tuned(tmp_path, base_rootfs, HostSpec(amd=2))
    cid, r = t.start({"gpuhook.dev/gpus": "1"})
    assert r.returncode == 0, r.stderr
    try:
        refused = t.gpuhook("partition", "apply", str(_layout(t, '[[amd]]\ngpus = "all"\ncompute = "DPX"\n')))
        (line,) = refused.stderr.strip().splitlines()
        assert refused.returncode != 0 and f"GPU 0000:81:00.0 is in use by container {cid}" in line, line
        assert _mode(t, 0) == _mode(t, 1) == "SPX"  # GPU 0 is free, but nothing changes when one GPU is refused
    finally:
        t.stop(cid)
    assert t.gpuhook("partition", "apply", str(t.tmp / "layout.toml")).returncode == 0
    assert _mode(t, 0) == _mode(t, 1) == "DPX"


@pytest.mark.parametrize(("spec", "text", "said"), [
    (HostSpec(amd=1), '[[amd]]\ngpus = [0]\ncompute = "TPX"\n',
     "AMD GPU 0000:80:00.0 offers compute partitions SPX, DPX, QPX, CPX: TPX refused"),
    (HostSpec(amd=1), '[[amd]]\ngpus = [3]\ncompute = "CPX"\n', "no GPU 3; this host has 0 (0000:80:00.0)"),
    (HostSpec(amd=1), '[[amd]]\ngpus = [0]\ncompute = "CPX"\nxcc = 2\n', "unknown key 'xcc'"),
    (HostSpec(nvidia=1), '[[nvidia]]\ngpus = "all"\nmig = ["1g.10gb"]\n', "gpuhook does not apply MIG layouts yet"),
    (HostSpec(amd=1), '[[intel]]\ngpus = "all"\n', "no vendor 'intel'"),
    (HostSpec(amd=1), '[[amd]\n', "cannot be read as TOML"),
], ids=["mode not offered", "no such gpu", "unknown key", "nvidia", "unknown vendor", "not toml"])
def test_refusals_are_one_line_and_change_nothing(tmp_path: Path, base_rootfs: str, spec: HostSpec, text: str,
                                                  said: str) -> None:
    t = Tuned(tmp_path, base_rootfs, spec)
    done = t.gpuhook("partition", "apply", str(_layout(t, text)))
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode != 0 and said in line and "Traceback" not in done.stderr, line
    if spec.amd:
        assert _mode(t, 0) == "SPX"


def test_without_amd_smi_the_kernels_files_are_written(tmp_path: Path, base_rootfs: str) -> None:
    """No libamd_smi: amdgpu's sysfs files, memory mode first (the simulator's files do not re-lay the devices)."""
    t = Tuned(tmp_path, base_rootfs, HostSpec(amd=1, amdsmi=False))
    done = t.gpuhook("partition", "apply", str(_layout(t, '[[amd]]\ngpus = "all"\ncompute = "QPX"\nmemory = "NPS4"\n')))
    assert done.returncode == 0, done.stderr
    assert _mode(t, 0) == "QPX" and _mode(t, 0, "current_memory_partition") == "NPS4"
