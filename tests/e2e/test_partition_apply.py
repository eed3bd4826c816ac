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
from .tuned import Tuned


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
    (HostSpec(amd=1), '[[intel]]\ngpus = "all"\n', "no vendor 'intel'"),
    (HostSpec(amd=1), '[[amd]\n', "cannot be read as TOML"),
], ids=["mode not offered", "no such gpu", "unknown key", "unknown vendor", "not toml"])
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


def _migs(t: Tuned) -> list[str]:
    text = t.gpuhook("list").stdout
    return [" ".join(line.split()[1:2] + line.split()[5:6]) for line in text.splitlines() if ":" in line.split()[1]]


def test_a_mig_layout_is_made_changed_and_undone_through_nvml(tmp_path: Path, base_rootfs: str) -> None:
    """MIG on and four instances on GPU 1, as NVIDIA's MIG manager would make them; a container gets one of them
    (its caps nodes made by the apply, as nvidia-modprobe would); another layout replaces them; [] turns MIG off."""
    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=2, mig_capable=True))
    layout = _layout(t, '[[nvidia]]\ngpus = [1]\nmig = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]\n')
    done = t.gpuhook("partition", "apply", str(layout))
    assert done.returncode == 0, done.stderr
    assert "MIG off -> 3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb" in done.stdout
    assert _migs(t) == ["1:0 3g.40gb", "1:1 2g.20gb", "1:2 1g.10gb", "1:3 1g.10gb"]
    cid, r = t.start({"gpuhook.dev/gpus": "1:2"})
    assert r.returncode == 0, r.stderr
    try:
        refused = t.gpuhook("partition", "apply", str(_layout(t, '[[nvidia]]\ngpus = [1]\nmig = ["7g.80gb"]\n')))
        (line,) = refused.stderr.strip().splitlines()
        assert refused.returncode != 0 and f"in use by container {cid}" in line, line
        assert _migs(t)[2] == "1:2 1g.10gb"
    finally:
        t.stop(cid)
    again = t.gpuhook("partition", "apply", str(t.tmp / "layout.toml"))
    assert again.returncode == 0 and "-> 7g.80gb" in again.stdout, again.stdout + again.stderr
    assert _migs(t) == ["1:0 7g.80gb"]
    off = t.gpuhook("partition", "apply", str(_layout(t, '[[nvidia]]\ngpus = "all"\nmig = []\n')))
    assert off.returncode == 0 and "7g.80gb -> MIG off" in off.stdout, off.stdout + off.stderr
    assert _migs(t) == []
    calls = t.log("nvml")
    assert calls.count("create-gi") == calls.count("create-ci") == 5 and calls.count("destroy-gi") == 5


@pytest.mark.parametrize(("spec", "text", "said"), [
    (HostSpec(nvidia=1, mig_capable=True), '[[nvidia]]\ngpus = [0]\nmig = ["5g.50gb"]\n',
     "has MIG profiles 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb, 1g.20gb: 5g.50gb refused"),
    (HostSpec(nvidia=1), '[[nvidia]]\ngpus = [0]\nmig = ["1g.10gb"]\n', "is not MIG capable"),
    (HostSpec(nvidia=1, mig_capable=True), '[[nvidia]]\ngpus = [0]\nmig = "1g.10gb"\n',
     "a layout is mig = [profile names]"),
], ids=["profile", "not capable", "not a list"])
def test_mig_refusals(tmp_path: Path, base_rootfs: str, spec: HostSpec, text: str, said: str) -> None:
    t = Tuned(tmp_path, base_rootfs, spec)
    done = t.gpuhook("partition", "apply", str(_layout(t, text)))
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode != 0 and said in line, line
    assert "create-gi" not in t.log("nvml")


def test_containers_started_during_applies_never_see_their_gpu_relaid(tmp_path: Path, base_rootfs: str) -> None:
    """Issue 43, 6: a layout change and a container's start exclude each other under the GPU path's lock, the users
    read again under it. Containers started (through the shim and runc) while applies flip the GPU between SPX and
    CPX keep the layout they were given: the devices in their spec are the layout's at start and at stop, and no
    apply changed it while they ran (one refused instead). Bounded: 8 containers, 40 applies, 120 s."""
    import json
    import threading
    import time
    import uuid

    from .tuned import _run_detached

    t = Tuned(tmp_path, base_rootfs, HostSpec(amd=1))
    layouts = [_layout(t, '[[amd]]\ngpus = "all"\ncompute = "CPX"\n'), t.tmp / "spx.toml"]
    layouts[1].write_text('[[amd]]\ngpus = "all"\ncompute = "SPX"\n')
    renders = {"SPX": 1, "CPX": 8}
    stop, applied = threading.Event(), []

    def applies() -> None:
        for n in range(40):
            if stop.is_set():
                return
            done = t.gpuhook("partition", "apply", str(layouts[n % 2]))
            applied.append(done.returncode)
            assert done.returncode == 0 or "is in use by container" in done.stderr, done.stderr

    def mode() -> str:  # the stub re-lays by rewriting its files: a read may fall between two (without the lock)
        for _ in range(100):
            try:
                return _mode(t, 0)
            except FileNotFoundError:
                time.sleep(0.01)
        return "gone"

    thread = threading.Thread(target=applies)
    thread.start()
    deadline, seen = time.monotonic() + 120, []
    try:
        for _ in range(8):
            if time.monotonic() > deadline:
                break
            cid = "pa-" + uuid.uuid4().hex[:8]
            b = t.bundle({"gpuhook.dev/gpus": "all", "gpuhook.dev/vendor": "amd"}, ["sleep", "60"])
            r = _run_detached(conftest.SHIM, b, cid, t.env)
            assert r.returncode == 0, r.stderr
            try:
                at_start = mode()
                devices = json.loads((b / "config.json").read_text())["linux"]["devices"]
                got = sum("/dev/dri/renderD" in d["path"] for d in devices)
                time.sleep(0.3)  # applies go on meanwhile: each must be refused while the container runs
                seen.append((got, at_start, mode()))
            finally:
                t.stop(cid)
    finally:
        stop.set()
        thread.join(timeout=120)
    assert len(seen) >= 4 and 0 in applied, (seen, applied)
    for got, at_start, at_end in seen:
        assert at_start == at_end and got == renders.get(at_start), seen
