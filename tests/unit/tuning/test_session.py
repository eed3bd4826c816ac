"""Tuning: request parsing, settings and policy (pure), and the ledger against the real stub NVML."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook.config import TuningPolicy
from gpuhook.errors import LedgerError, PolicyError, RequestError, TuningError
from gpuhook.host.inventory import Gpu, VendorInventory
from gpuhook.host.processes import start_time
from gpuhook.host.root import Root
from gpuhook.plan.tuning import check_policy, settings_for
from gpuhook.request.tuning import Tuning, parse_tuning
from gpuhook.tuning import ledger, session
from gpuhook.tuning.backends import BackendSet
from gpuhook.vendors.contract import Setting
from gpuhook.vendors.discover import discover

FakeHost = Callable[..., str]

PARSE = [
    ("clock", {"clocks": "1500"}, Tuning(clocks=(1500, 1500))),
    ("clock range", {"clocks": "1200-1800MHz"}, Tuning(clocks=(1200, 1800))),
    ("power", {"power-limit": "300W"}, Tuning(power_limit=300)),
    ("perf", {"perf-level": "Profile_Peak"}, Tuning(perf_level="profile_peak")),
    ("mode", {"compute-mode": "exclusive-process"}, Tuning(compute_mode="exclusive-process")),
    ("exclusive", {"exclusive": "true"}, Tuning(exclusive=True)),
    ("amd knobs", {"fine-grain-pcie": "true", "gfx-override": "10.3.0"},
     Tuning(env=("HSA_FORCE_FINE_GRAIN_PCIE=1", "HSA_OVERRIDE_GFX_VERSION=10.3.0"))),
]


@pytest.mark.parametrize(("ours", "tuning"), [p[1:] for p in PARSE], ids=[p[0] for p in PARSE])
def test_parse(ours: dict[str, str], tuning: Tuning) -> None:
    assert parse_tuning(ours) == tuning


BAD = [("clocks", "fast"), ("clocks", "1800-1200"), ("clocks", "0"), ("power-limit", "-5"), ("perf-level", "turbo"),
       ("compute-mode", "exclusive-thread"), ("exclusive", "yes"), ("fine-grain-pcie", "1"), ("gfx-override", "10.3")]


@pytest.mark.parametrize(("key", "value"), BAD, ids=[f"{k}={v}" for k, v in BAD])
def test_bad_values_name_key_and_value(key: str, value: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_tuning({key: value})
    assert f"gpuhook.dev/{key}={value!r}" in str(info.value)


NV = VendorInventory(vendor="nvidia", driver_version="550", gpus=(Gpu(vendor="nvidia", index=0, uuid="GPU-a",
                                                                      pci="0000:10:00.0", model="H100", nodes=()),),
                     shared_nodes=())
AMD = VendorInventory(vendor="amd", driver_version=None, gpus=(Gpu(vendor="amd", index=0, uuid="0x1",
                                                                   pci="0000:80:00.0", model="gfx942", nodes=(),
                                                                   missing=(), arch="gfx942", sysfs="/sys/x"),),
                      shared_nodes=())


def test_settings_per_vendor() -> None:
    t = Tuning(clocks=(1500, 1600), power_limit=300)
    assert [(s.name, s.value, s.device) for s in settings_for(t, [(NV, NV.gpus)])] == [
        ("clocks", "1500-1600", "GPU-a"), ("power_limit", "300000", "GPU-a")]
    assert [(s.name, s.value, s.device) for s in settings_for(t, [(AMD, AMD.gpus)])] == [
        ("perf_level", "manual", "/sys/x"), ("sclk", "1500-1600", "/sys/x"), ("power_cap", "300000000", "/sys/x")]


@pytest.mark.parametrize(("tuning", "inv", "needle"), [
    (Tuning(perf_level="high"), NV, "AMD setting"), (Tuning(compute_mode="prohibited"), AMD, "NVIDIA setting"),
    (Tuning(clocks=(1500, 1500), perf_level="high"), AMD, "manual performance level")],
    ids=["perf on nvidia", "mode on amd", "clocks vs perf"])
def test_settings_for_the_wrong_vendor(tuning: Tuning, inv: VendorInventory, needle: str) -> None:
    with pytest.raises(RequestError, match=needle):
        settings_for(tuning, [(inv, inv.gpus)])


POLICY = [
    (Tuning(clocks=(1500, 1500)), TuningPolicy(allow=False), "allow_tuning = false"),
    (Tuning(clocks=(2500, 2600)), TuningPolicy(clocks_mhz=(500, 2000)), "500-2000 MHz"),
    (Tuning(power_limit=900), TuningPolicy(power_watts=(100, 700)), "100-700 W"),
    (Tuning(perf_level="high"), TuningPolicy(perf_levels=("auto", "low")), "allowed: auto, low"),
    (Tuning(exclusive=True), TuningPolicy(exclusive=False), "exclusive = false"),
]


@pytest.mark.parametrize(("tuning", "policy", "needle"), POLICY, ids=["off", "clocks", "power", "perf", "exclusive"])
def test_policy_says_what_it_allows(tuning: Tuning, policy: TuningPolicy, needle: str) -> None:
    with pytest.raises(PolicyError, match=needle):
        check_policy(tuning, policy)
    check_policy(Tuning(clocks=(1000, 1000)), TuningPolicy(clocks_mhz=(500, 2000)))


# ---- the ledger, against the real stub NVML of a simulated host ----------------------------------------------

def _dead_holder(name: str) -> session.Holder:
    p = subprocess.Popen(["sleep", "0"])
    start = start_time(p.pid)
    p.wait()
    return session.Holder(name, p.pid, start)


ME = session.Holder("me", os.getpid(), start_time(os.getpid()))


def _nv_state(host: str) -> dict[int, list[int]]:
    return {int(f[0]): [int(x) for x in f[1:]] for f in (ln.split() for ln in Path(f"{host}/var/lib/gpuhook-sim/nvml")
                                                          .read_text().splitlines())}


def _clock(host: str, index: int, value: str) -> Setting:
    inv = discover(Root(host)).vendor("nvidia")
    assert inv is not None
    g = inv.gpus[index]
    return Setting(vendor="nvidia", gpu=g.uuid, index=g.index, pci=g.pci, device=g.uuid, name="clocks", value=value)


def test_join_conflict_and_last_holder_restores(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=1)
    root = Root(host)
    other = session.Holder("other", os.getppid(), start_time(os.getppid()))
    with BackendSet(root, str(tmp_path)) as b:
        session.acquire(str(tmp_path), ME, [_clock(host, 0, "1500-1500")], [], b)
        session.acquire(str(tmp_path), other, [_clock(host, 0, "1500-1500")], [], b)  # same value: joins
        with pytest.raises(PolicyError, match="has clocks 1500-1500 set for container me"):
            third = session.Holder("third", os.getpid(), ME.start)
            session.acquire(str(tmp_path), third, [_clock(host, 0, "900-900")], [], b)
        assert _nv_state(host)[0][:2] == [1500, 1500]
        session.release(str(tmp_path), "me", b)
        assert _nv_state(host)[0][:2] == [1500, 1500]  # the other still holds it
        session.release(str(tmp_path), "other", b)
        assert _nv_state(host)[0][:2] == [0, 0]
    log = Path(f"{host}/var/lib/gpuhook-sim/nvml.log").read_text().splitlines()
    assert [ln.split()[0] for ln in log] == ["set-clocks", "reset-clocks"]  # applied once, restored once


def test_failure_on_the_second_gpu_rolls_back_the_first(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=2)
    Path(f"{host}/var/lib/gpuhook-sim/nvml.fail").write_text("1 clocks\n")
    root = Root(host)
    with BackendSet(root, str(tmp_path)) as b, pytest.raises(TuningError, match="rolled back"):
        session.acquire(str(tmp_path), ME, [_clock(host, 0, "1500-1500"), _clock(host, 1, "1500-1500")], [], b)
    assert _nv_state(host)[0][:2] == [0, 0]
    assert ledger.load(str(tmp_path / "ledger.json"))["settings"] == {}


def test_sweep_restores_what_dead_containers_held(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=1)
    root = Root(host)
    with BackendSet(root, str(tmp_path)) as b:
        session.acquire(str(tmp_path), _dead_holder("crashed"), [_clock(host, 0, "1500-1500")], [], b)
        assert _nv_state(host)[0][:2] == [1500, 1500]
        assert session.sweep(str(tmp_path), b) == []
    assert _nv_state(host)[0][:2] == [0, 0]


def test_exclusive_lease(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=1)
    root = Root(host)
    gpu = _clock(host, 0, "x").gpu
    with BackendSet(root, str(tmp_path)) as b:
        with pytest.raises(PolicyError, match="in use by container busy"):
            session.acquire(str(tmp_path), ME, [], [gpu], b, lambda g: ["busy"])
        session.acquire(str(tmp_path), ME, [], [gpu], b)
        with pytest.raises(PolicyError, match="held exclusively by container me"):
            following = session.Holder("next", os.getpid(), ME.start)
            session.acquire(str(tmp_path), following, [_clock(host, 0, "1500-1500")], [], b)
        session.release(str(tmp_path), "me", b)
        assert ledger.load(str(tmp_path / "ledger.json"))["leases"] == {}


def test_corrupt_ledger_is_an_error_with_the_way_out_and_is_left_alone(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=1)
    root = Root(host)
    with BackendSet(root, str(tmp_path)) as b:
        session.acquire(str(tmp_path), ME, [_clock(host, 0, "1500-1500")], [], b)
        good = (tmp_path / "ledger.json").read_text()
        (tmp_path / "ledger.json").write_text('{"version": 1, "settings": {trunc')
        with pytest.raises(LedgerError) as info:
            session.sweep(str(tmp_path), b)
        assert "ledger.json.prev" in str(info.value) and "gpuhook gc" in str(info.value)
        assert (tmp_path / "ledger.json").read_text() == '{"version": 1, "settings": {trunc'  # never reset
        (tmp_path / "ledger.json").write_text(good)  # the documented recovery (here: the good copy itself)
        session.release(str(tmp_path), "me", b)
    assert _nv_state(host)[0][:2] == [0, 0]
    assert json.loads((tmp_path / "ledger.json").read_text())["settings"] == {}


def test_the_ledger_file_never_disappears_while_it_is_rewritten(tmp_path: Path) -> None:
    """Readers outside the lock (the shim's lease check, poststop's quick look) must always find it."""
    import threading

    ledger.save(str(tmp_path), ledger.empty())
    stop = threading.Event()
    missing = []

    def watch() -> None:
        while not stop.is_set():
            if not (tmp_path / "ledger.json").exists():
                missing.append(1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    for i in range(300):
        state = ledger.empty()
        state["seq"] = i
        ledger.save(str(tmp_path), state)
    stop.set()
    watcher.join()
    assert missing == []
    assert json.loads((tmp_path / "ledger.json.prev").read_text())["seq"] == 299  # a copy of the last good one
    (tmp_path / "ledger.json").write_text("{trunc")  # damaged in place: the copy is not the same file
    assert json.loads((tmp_path / "ledger.json.prev").read_text())["seq"] == 299


@pytest.mark.parametrize("state", [
    ledger.empty(),
    {"version": 1, "seq": 2, "leases": {"GPU-1": {"id": "c1", "pid": 7, "start": "99"}},
     "settings": {"GPU-1/clocks": {"vendor": "nvidia", "original": "unlocked", "value": "1500-1500", "seq": 1,
                                   "holders": [{"id": "c1", "pid": 7, "start": "99"}]},
                  "0000:03:00.0/perf_level": {"vendor": "amd", "original": "auto", "value": "high", "seq": 2,
                                              "holders": [{"id": "c\u00e9\"2", "pid": 8, "start": "1"}]}}},
], ids=["empty", "two-settings"])
def test_ledger_is_json_with_a_line_per_setting(tmp_path: Path, state: ledger.State) -> None:
    ledger.save(str(tmp_path), state)
    text = (tmp_path / ledger.NAME).read_text()
    assert json.loads(text) == state == ledger.load(str(tmp_path / ledger.NAME))
    for key in state["settings"]:
        (line,) = [ln for ln in text.splitlines() if ln.strip().startswith(json.dumps(key))]
        assert json.loads(line.split(": ", 1)[1].rstrip(",")) == state["settings"][key]


def test_sysfs_writes_go_where_discovery_says_never_where_the_ledger_says(fake_host: FakeHost) -> None:
    from gpuhook.vendors.amd import vendor as amd
    from gpuhook.vendors.amd.backends import SysfsBackend

    host = fake_host(amd=1, amdsmi=False)
    dev = Path(host) / "sys/devices/pci0000:00/0000:80:00.0"
    (Path(host) / "etc/power_dpm_force_performance_level").parent.mkdir(parents=True, exist_ok=True)
    forged = Setting(vendor="amd", gpu="0x5a1e000000000000", index=0, pci="0000:80:00.0", device="/etc",
                     name="perf_level", value="high")
    SysfsBackend(Root(host), amd.discover).set(forged, "high")
    assert (dev / "power_dpm_force_performance_level").read_text().strip() == "high"
    assert not (Path(host) / "etc/power_dpm_force_performance_level").exists()
    target = dev / "power_dpm_force_performance_level"
    target.unlink()
    os.symlink(Path(host) / "victim", target)
    with pytest.raises(TuningError, match="cannot write"):
        SysfsBackend(Root(host), amd.discover).set(forged, "auto")
    assert not (Path(host) / "victim").exists()
    with pytest.raises(TuningError, match="not among the host's AMD GPUs"):
        SysfsBackend(Root(host), amd.discover).set(
            Setting(vendor="amd", gpu="x", index=0, pci="0000:99:00.0", device=str(dev), name="perf_level",
                    value="high"), "high")


def test_the_same_id_under_two_engines_is_two_containers(fake_host: FakeHost, tmp_path: Path) -> None:
    """Holders are the container id and its init: a stopped container's poststop releases its own holdings,
    never those of a live container with the same id under another runtime root."""
    host = fake_host(nvidia=1)
    root = Root(host)
    gone = _dead_holder("web")  # engine A's "web", stopped
    alive = session.Holder("web", os.getpid(), start_time(os.getpid()))  # engine B's "web", running
    with BackendSet(root, str(tmp_path)) as b:
        session.acquire(str(tmp_path), gone, [_clock(host, 0, "1500-1500")], [], b)
    with BackendSet(root, str(tmp_path)) as b:  # (A's init already gone: B's acquire sweeps A's holding first)
        session.acquire(str(tmp_path), alive, [_clock(host, 0, "1500-1500")], [_clock(host, 0, "x").gpu], b)
        twin = session.Holder("web", os.getppid(), start_time(os.getppid()))
        with pytest.raises(PolicyError, match="held exclusively by container web"):
            session.acquire(str(tmp_path), twin, [], [_clock(host, 0, "x").gpu], b)
        assert session.release(str(tmp_path), "web", b, only_gone=True) == []
        state = ledger.load(str(tmp_path / "ledger.json"))
        assert [h["pid"] for e in state["settings"].values() for h in e["holders"]] == [os.getpid()]
        assert state["leases"][_clock(host, 0, "x").gpu]["pid"] == os.getpid()
        session.release(str(tmp_path), "web", b)
    assert ledger.load(str(tmp_path / "ledger.json")) == {**ledger.empty(), "seq": 2}


def test_a_power_cap_beyond_the_gpus_maximum_is_refused_not_written(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(amd=1, amdsmi=False)
    cap = Path(host) / "sys/devices/pci0000:00/0000:80:00.0/hwmon/hwmon0/power1_cap"
    s = Setting(vendor="amd", gpu="0x5a1e000000000000", index=0, pci="0000:80:00.0", device="", name="power_cap",
                value="900000000")
    with BackendSet(Root(host), str(tmp_path)) as b, pytest.raises(TuningError, match="takes a power cap of 100-750 W"):
        session.acquire(str(tmp_path), ME, [s], [], b)
    assert cap.read_text().strip() == "300000000"
    assert ledger.load(str(tmp_path / "ledger.json"))["settings"] == {}


def test_a_power_limit_outside_the_boards_range_is_refused_not_sent(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=1)
    g = discover(Root(host)).vendor("nvidia").gpus[0]  # type: ignore[union-attr]
    s = Setting(vendor="nvidia", gpu=g.uuid, index=0, pci=g.pci, device=g.uuid, name="power_limit", value="900000")
    with BackendSet(Root(host), str(tmp_path)) as b, pytest.raises(TuningError, match="100-700 W: 900 W refused"):
        session.acquire(str(tmp_path), ME, [s], [], b)
    log = Path(host) / "var/lib/gpuhook-sim/nvml.log"
    assert not log.exists() or "set-power" not in log.read_text()  # never sent
    assert ledger.load(str(tmp_path / "ledger.json"))["settings"] == {}


def _power(host: str, index: int, value: str) -> Setting:
    c = _clock(host, index, "x")
    return Setting(vendor=c.vendor, gpu=c.gpu, index=c.index, pci=c.pci, device=c.device, name="power_limit",
                   value=value)


def test_one_ledger_write_and_one_nvml_session_per_call(fake_host: FakeHost, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """acquire and release read and write the ledger once each, whatever the settings, and bind NVML once (no session
    per GPU or per setting); a release of a container holding nothing writes nothing."""
    host = fake_host(nvidia=2)
    inits = Path(f"{host}/var/lib/gpuhook-sim/nvml.inits")
    saves: list[int] = []
    real_save = ledger.save
    monkeypatch.setattr(ledger, "save", lambda d, s: (saves.append(1), real_save(d, s)))
    asked = [_clock(host, 0, "1500-1500"), _power(host, 0, "400000"), _clock(host, 1, "1500-1500"),
             _power(host, 1, "400000")]
    with BackendSet(Root(host), str(tmp_path)) as b:
        session.acquire(str(tmp_path), ME, asked, [], b)
    assert len(saves) == 1 and len(inits.read_text().splitlines()) == 1
    assert [s[:3] for s in _nv_state(host).values()] == [[1500, 1500, 400000]] * 2
    with BackendSet(Root(host), str(tmp_path)) as b:
        assert session.release(str(tmp_path), "nobody", b) == []
    assert len(saves) == 1 and len(inits.read_text().splitlines()) == 1  # nothing held: nothing written or bound
    with BackendSet(Root(host), str(tmp_path)) as b:
        assert session.release(str(tmp_path), "me", b) == []
    assert len(saves) == 2 and len(inits.read_text().splitlines()) == 2
    assert [s[:3] for s in _nv_state(host).values()] == [[0, 0, 700000]] * 2


def test_joining_a_held_setting_binds_no_backend(fake_host: FakeHost, tmp_path: Path) -> None:
    """A second container asking what the GPU already holds for another joins it in the ledger: no NVML session, no
    write to the GPU; the setting is restored only after the last holder leaves."""
    host = fake_host(nvidia=1)
    inits = Path(f"{host}/var/lib/gpuhook-sim/nvml.inits")
    other = session.Holder("other", os.getppid(), start_time(os.getppid()))
    with BackendSet(Root(host), str(tmp_path)) as b:
        session.acquire(str(tmp_path), ME, [_clock(host, 0, "1500-1500")], [], b)
    with BackendSet(Root(host), str(tmp_path)) as b:
        session.acquire(str(tmp_path), other, [_clock(host, 0, "1500-1500")], [], b)
    assert len(inits.read_text().splitlines()) == 1
    with BackendSet(Root(host), str(tmp_path)) as b:
        session.release(str(tmp_path), "me", b)
    assert len(inits.read_text().splitlines()) == 1 and _nv_state(host)[0][:2] == [1500, 1500]
    with BackendSet(Root(host), str(tmp_path)) as b:
        session.release(str(tmp_path), "other", b)
    assert _nv_state(host)[0][:2] == [0, 0]


def test_a_value_the_gpu_already_has_is_not_written(fake_host: FakeHost, tmp_path: Path) -> None:
    """STYLE rule 4: the power limit asked is the GPU's own: recorded (its holder restores nothing), never written."""
    host = fake_host(nvidia=1)
    with BackendSet(Root(host), str(tmp_path)) as b:
        session.acquire(str(tmp_path), ME, [_power(host, 0, "700000")], [], b)
        assert ledger.load(str(tmp_path / "ledger.json"))["settings"]
        session.release(str(tmp_path), "me", b)
    log = Path(f"{host}/var/lib/gpuhook-sim/nvml.log")
    assert not log.exists() or log.read_text() == ""


def test_a_failed_write_restores_it_and_drops_what_was_never_written(fake_host: FakeHost, tmp_path: Path) -> None:
    """The second of three settings fails: the first is restored, the failed one too (it may have changed half-way),
    the third was never written and is not written now; the ledger holds nothing after."""
    host = fake_host(nvidia=3)
    Path(f"{host}/var/lib/gpuhook-sim/nvml.fail").write_text("1 clocks\n")
    with BackendSet(Root(host), str(tmp_path)) as b, pytest.raises(TuningError, match="rolled back"):
        session.acquire(str(tmp_path), ME, [_clock(host, i, "1500-1500") for i in range(3)], [], b)
    log = [ln.split()[:2] for ln in Path(f"{host}/var/lib/gpuhook-sim/nvml.log").read_text().splitlines()]
    assert ["set-clocks", "2"] not in log and ["reset-clocks", "2"] not in log
    assert log[0] == ["set-clocks", "0"] and ["reset-clocks", "0"] in log
    assert ledger.load(str(tmp_path / "ledger.json"))["settings"] == {}


def test_join_only_where_every_setting_is_held_at_its_value(fake_host: FakeHost, tmp_path: Path) -> None:
    """The shim's join: True (and the holder recorded, with runc's state directory) only where each setting is held
    already at exactly the value by a live container and no live lease is on its GPU; else nothing is written."""
    host = fake_host(nvidia=2)
    runc = tmp_path / "runc"
    shim = session.Holder("joined", os.getpid(), ME.start, str(runc))
    assert not session.join(str(tmp_path), shim, [_clock(host, 0, "1500-1500")])  # nothing held
    assert not (tmp_path / "ledger.json").exists()
    with BackendSet(Root(host), str(tmp_path)) as b:
        session.acquire(str(tmp_path), ME, [_clock(host, 0, "1500-1500")], [], b)
    written = (tmp_path / "ledger.json").read_text()
    for asked in ([_clock(host, 0, "900-900")], [_clock(host, 0, "1500-1500"), _clock(host, 1, "1500-1500")]):
        assert not session.join(str(tmp_path), shim, asked)
        assert (tmp_path / "ledger.json").read_text() == written
    assert session.join(str(tmp_path), shim, [_clock(host, 0, "1500-1500")])
    holders = ledger.load(str(tmp_path / "ledger.json"))["settings"][_clock(host, 0, "x").key]["holders"]
    assert holders[1] == {"id": "joined", "pid": os.getpid(), "start": ME.start, "root": str(runc)}
    inits = Path(f"{host}/var/lib/gpuhook-sim/nvml.inits").read_text().splitlines()
    assert len(inits) == 1  # joining binds nothing


def test_a_joined_holder_lives_while_runc_keeps_its_state(fake_host: FakeHost, tmp_path: Path) -> None:
    """A holder the shim joined is alive while the process that execs runc is, then while runc's state.json is
    there: the setting stays when the first holder leaves, and goes with the state (the poststop of either, or the
    sweep of a release, finds it gone)."""
    host = fake_host(nvidia=1)
    runc = tmp_path / "runc"
    (runc / "joined").mkdir(parents=True)
    gone = _dead_holder("x")
    joined = session.Holder("joined", gone.pid, gone.start, str(runc))
    with BackendSet(Root(host), str(tmp_path)) as b:
        session.acquire(str(tmp_path), ME, [_clock(host, 0, "1500-1500")], [], b)
        assert session.join(str(tmp_path), joined, [_clock(host, 0, "1500-1500")])
        (runc / "joined" / "state.json").write_text("{}")
        session.release(str(tmp_path), "me", b)
        assert _nv_state(host)[0][:2] == [1500, 1500]  # the joined container's state is there: it holds
        session.acquire(str(tmp_path), ME, [_clock(host, 0, "1500-1500")], [], b)
        (runc / "joined" / "state.json").unlink()  # runc removed it (runc never made it, or deleted it)
        session.release(str(tmp_path), "me", b)
    assert _nv_state(host)[0][:2] == [0, 0]
    assert ledger.load(str(tmp_path / "ledger.json"))["settings"] == {}
