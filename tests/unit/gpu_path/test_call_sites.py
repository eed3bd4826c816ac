"""The four places the GPU path records a container, each through its one transaction: the shim
(inject.edited_spec), a container with GPU nodes and no request (inject.register_device_container), the prestart
hook giving a container live (hook_stages._give) and the hook following the shim's plan (hook_stages._follow).
Which lock each holds as it writes, the record and the count it leaves, and the lock let go after, an error's way
too. Run on simulated hosts, in this process (the lock is this process's)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuhook.apply import containers, counters, state_dir
from gpuhook.config import Config
from gpuhook.errors import PlanError
from gpuhook.gpu_path import hook_stages
from gpuhook.gpu_path.inject import edit_bundle, edited_spec
from gpuhook.host.root import Root
from gpuhook.testing.bundle import oci_config
from gpuhook.vendors.discover import discover

from ...conftest import FakeHost

ONE = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}
COUNT = {"gpuhook.dev/gpus": "count:1", "gpuhook.dev/vendor": "nvidia"}
PREPARED = {("prepared", "nvidia"): 1}


def _lock() -> str:
    """The GPU path's lock as this process holds it now."""
    return "exclusive" if state_dir.holds_lock(exclusive=True) else "shared" if state_dir.holds_lock(
        exclusive=False) else "none"


@pytest.fixture
def saves(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, containers.ContainerRecord]]:
    """(the lock held, the record) of every record written."""
    seen: list[tuple[str, containers.ContainerRecord]] = []
    save = containers.save

    def spy(directory: str, rec: containers.ContainerRecord) -> None:
        seen.append((_lock(), rec))
        save(directory, rec)

    monkeypatch.setattr(containers, "save", spy)
    return seen


class _Site:
    """A simulated host, a bundle on it and the config that names both."""

    def __init__(self, host: str, tmp_path: Path) -> None:
        self.state = tmp_path / "state"
        self.bundle = tmp_path / "bundle"
        (self.bundle / "rootfs" / "dev").mkdir(parents=True)
        self.table: dict[str, Any] = {"host_root": host, "runtime": "/bin/true", "state_dir": str(self.state)}
        self.runc = str(tmp_path / "runc")

    def spec(self, annotations: dict[str, str] | None = None,
             devices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        spec = oci_config(["true"], annotations=annotations)
        if devices is not None:
            spec["linux"]["devices"] = devices
        (self.bundle / "config.json").write_text(json.dumps(spec))
        return spec

    def shim(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        new, _ = edited_spec(spec, str(self.bundle), "c1", self.table, "c", validated=True, runtime_root=self.runc)
        return new

    def hook(self, monkeypatch: pytest.MonkeyPatch, give: Any = None) -> list[str]:
        """The prestart hook on the bundle, with the container's namespaces left alone (`give` stands for
        apply/live.apply); the lock held as it gives."""
        from gpuhook.apply import live

        held: list[str] = []

        def apply(*args: Any) -> None:
            held.append(_lock())
            if give is not None:
                give()

        monkeypatch.setattr(live, "apply", apply)
        monkeypatch.setattr(hook_stages, "load", lambda: Config(path="c", **self.table))
        monkeypatch.setattr(hook_stages, "remember_state", lambda *a: None)
        hook_stages.prestart({"id": "c1", "pid": os.getpid(), "bundle": str(self.bundle)})
        return held

    def records(self) -> list[containers.ContainerRecord]:
        return containers.live_records(str(self.state), prune=False)


@pytest.mark.parametrize(("annotations", "lock"), [(ONE, "shared"), (COUNT, "exclusive")], ids=["one", "count"])
def test_the_shim_records_and_counts_under_the_lock(fake_host: FakeHost, tmp_path: Path, annotations: dict[str, str],
                                                    lock: str, saves: list[tuple[str, Any]]) -> None:
    site = _Site(fake_host(nvidia=2), tmp_path)
    assert site.shim(site.spec(annotations)) is not None
    assert [(held, rec.planned, len(rec.gpus), rec.runtime_root) for held, rec in saves] == [(lock, True, 1, site.runc)]
    assert counters.totals(str(site.state)) == PREPARED
    assert _lock() == "none"


def test_a_shim_refusal_lets_the_lock_go_and_records_nothing(fake_host: FakeHost, tmp_path: Path,
                                                             saves: list[tuple[str, Any]]) -> None:
    site = _Site(fake_host(nvidia=1), tmp_path)
    with pytest.raises(PlanError, match="no NVIDIA GPU 7"):
        site.shim(site.spec({"gpuhook.dev/gpus": "7", "gpuhook.dev/vendor": "nvidia"}))
    assert (saves, site.records(), counters.totals(str(site.state))) == ([], [], {})
    assert _lock() == "none" and (site.state / state_dir.LOCK).exists()


def test_a_container_asking_nothing_takes_no_lock(fake_host: FakeHost, tmp_path: Path) -> None:
    site = _Site(fake_host(nvidia=1), tmp_path)
    assert site.shim(site.spec({})) is None
    assert not (site.state / state_dir.LOCK).exists()


@pytest.mark.parametrize(("node", "lock", "recorded"), [
    ("gpu", "shared", True),  # the GPU's node: recorded with it
    ("other", "shared", False),  # a node of no GPU: looked at under the lock, not recorded
    ("none", "", False),  # no device at all: no lock
], ids=["gpu-node", "other-node", "no-devices"])
def test_a_container_with_gpu_nodes_and_no_request_is_recorded_under_the_shared_lock(
        fake_host: FakeHost, tmp_path: Path, node: str, lock: str, recorded: bool,
        saves: list[tuple[str, Any]]) -> None:
    host = fake_host(nvidia=2)
    gpu = discover(Root(host)).vendors[0].gpus[1]
    n = gpu.nodes[0]
    devices = {"gpu": [{"path": n.path, "type": "c", "major": n.major, "minor": n.minor}],
               "other": [{"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229}], "none": []}[node]
    site = _Site(host, tmp_path)
    data = json.dumps(site.spec(devices=devices)).encode()
    assert edit_bundle(data, str(site.bundle), "c1", site.table, "c", True, site.runc, 0, False) == ()
    assert [(held, rec.gpus, rec.planned) for held, rec in saves] == ([(lock, (gpu.key(),), False)] if recorded
                                                                      else [])
    assert (site.state / state_dir.LOCK).exists() == bool(lock)
    assert counters.totals(str(site.state)) == {}  # such a container is not one gpuhook prepared
    assert _lock() == "none"


@pytest.mark.parametrize(("annotations", "lock"), [(ONE, "shared"), (COUNT, "exclusive")], ids=["one", "count"])
def test_the_hook_gives_records_and_counts_under_the_lock(fake_host: FakeHost, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, annotations: dict[str, str],
                                                          lock: str, saves: list[tuple[str, Any]]) -> None:
    site = _Site(fake_host(nvidia=2), tmp_path)
    site.spec(annotations)
    assert site.hook(monkeypatch) == [lock]
    assert [(held, rec.pid, rec.planned, len(rec.gpus)) for held, rec in saves] == [(lock, os.getpid(), False, 1)]
    assert counters.totals(str(site.state)) == PREPARED
    assert _lock() == "none"


def test_a_hook_that_fails_to_give_lets_the_lock_go_and_records_nothing(fake_host: FakeHost, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       saves: list[tuple[str, Any]]) -> None:
    site = _Site(fake_host(nvidia=1), tmp_path)
    site.spec(ONE)

    def fail() -> None:
        raise OSError(1, "Operation not permitted")

    with pytest.raises(OSError, match="not permitted"):
        site.hook(monkeypatch, fail)
    assert (saves, site.records(), counters.totals(str(site.state))) == ([], [], {})
    assert _lock() == "none"


@pytest.mark.parametrize("annotations", [ONE, COUNT], ids=["one", "count"])
def test_the_hook_following_the_shim_commits_without_the_lock(fake_host: FakeHost, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              annotations: dict[str, str],
                                                              saves: list[tuple[str, Any]]) -> None:
    site = _Site(fake_host(nvidia=2), tmp_path)
    site.shim(site.spec(annotations))
    assert site.hook(monkeypatch) == []  # nothing given live: config.json has it
    (shim_lock, shims), (hook_lock, rec) = saves
    assert (shim_lock, shims.planned, hook_lock, rec.planned, rec.pid) == (
        "exclusive" if annotations is COUNT else "shared", True, "none", False, os.getpid())
    assert rec.gpus == shims.gpus
    assert counters.totals(str(site.state)) == PREPARED  # the shim counted it, the hook did not again
    assert _lock() == "none"
