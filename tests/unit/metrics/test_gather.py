"""What one scrape reads from state_dir: live records with their pods, the ledger without its lock, counters; and
that it changes nothing there."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from gpuhook.apply import containers, counters
from gpuhook.host.processes import start_time
from gpuhook.host.root import Root
from gpuhook.metrics.families import TuningRow, View
from gpuhook.metrics.gather import gather
from gpuhook.tuning import ledger

ME = {"id": "web", "pid": os.getpid(), "start": start_time(os.getpid())}
GONE = {"id": "old", "pid": 2**22 + 1, "start": "1"}


def _entry(gpu: str, name: str, value: str, original: str, holders: list[dict[str, object]]) -> dict[str, object]:
    return {"vendor": "nvidia", "gpu": gpu, "index": 0, "pci": "0000:10:00.0", "device": gpu, "name": name,
            "original": original, "value": value, "holders": holders, "seq": 1}


def _files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def test_no_state_dir_is_nothing_to_read_and_is_not_made(tmp_path: Path) -> None:
    view = gather(Root(str(tmp_path)), str(tmp_path / "state"), None)
    assert view == View(inventory=view.inventory) and not (tmp_path / "state").exists()


def test_records_ledger_and_counters_are_read_and_left_as_they_are(tmp_path: Path) -> None:
    state = tmp_path / "state"
    runtime = tmp_path / "runc"
    (runtime / "web").mkdir(parents=True)
    (runtime / "web/state.json").write_text("{}")
    web = containers.ContainerRecord(id="web", drivers=(("nvidia", "550.54.15"),), runtime_root=str(runtime),
                                     gpus=("GPU-1",), pod="web-0",
                                     namespace="shop", container="server")
    containers.save(str(state), web)
    containers.save(str(state), containers.ContainerRecord(id="old", drivers=(), runtime_root=str(runtime),
                                                           gpus=("GPU-2",)))  # it is gone
    for _ in range(3):
        counters.bump(str(state), counters.PREPARED, "nvidia")
    counters.bump(str(state), counters.REFUSED, "PlanError")
    led = ledger.empty()
    led["settings"] = {"nvidia:GPU-1:clocks": _entry("GPU-1", "clocks", "1500-1500", "unlocked", [ME, GONE]),
                       "nvidia:GPU-2:power_limit": _entry("GPU-2", "power_limit", "400000", "700000", [GONE])}
    led["leases"] = {"GPU-1": ME, "GPU-2": GONE}
    (state / "ledger.json").write_text(json.dumps(led))
    before = _files(state)
    with ledger.locked(str(state)):  # a container start holds the lock: the scrape neither waits nor takes it
        done: list[View] = []
        reader = threading.Thread(target=lambda: done.append(gather(Root(str(tmp_path)), str(state), None)))
        reader.start()
        reader.join(10)
    assert done, "the scrape waited for the ledger's lock"
    view = done[0]
    assert view.records == (web,)
    assert view.settings == (TuningRow(vendor="nvidia", gpu="GPU-1", setting="clocks", current="1500-1500",
                                       original="unlocked", holders=1),
                             TuningRow(vendor="nvidia", gpu="GPU-2", setting="power_limit", current="400000",
                                       original="700000", holders=0))
    assert view.leases == (("GPU-1", "web"),)
    assert dict(view.counters) == {("prepared", "nvidia"): 3, ("refused", "PlanError"): 1}
    assert view.ledger_ok
    assert _files(state) == [*before, "ledger.lock"]  # the lock file is the test's own; gone records stay for gc


def test_a_corrupt_ledger_is_reported_and_the_rest_still_read(tmp_path: Path) -> None:
    state = tmp_path / "state"
    counters.bump(str(state), counters.PREPARED, "amd")
    (state / "ledger.json").write_text('{"version": 1, "settings": {"k": {"gpu": "GPU-1"}}, "leases": {}}')
    view = gather(Root(str(tmp_path)), str(state), None)
    assert not view.ledger_ok and view.settings == () and dict(view.counters) == {("prepared", "amd"): 1}
    (state / "ledger.json").write_text("{not json")
    assert not gather(Root(str(tmp_path)), str(state), None).ledger_ok


def test_state_dir_someone_else_can_write_is_not_read(tmp_path: Path) -> None:
    state = tmp_path / "state"
    counters.bump(str(state), counters.PREPARED, "amd")
    state.chmod(0o777)
    view = gather(Root(str(tmp_path)), str(state), None)
    assert not view.ledger_ok and view.counters == ()
