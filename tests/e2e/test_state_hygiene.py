"""State stays small and clean: a bounded soak of GPU containers with tuning leaves state_dir with what no
container needs removed by poststop and gc; what a killed writer left is swept; a full state_dir is one line,
config.json unchanged, nothing applied."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from . import conftest
from .conftest import Run

NV = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}


def _files(state: Path) -> list[str]:
    def kept(p: Path) -> bool:  # files, and procfs copies as one entry each
        return (p.is_file() and "-procfs/" not in str(p)) or (p.is_dir() and p.parent.name.endswith("-procfs"))

    return sorted(str(p.relative_to(state)) for p in state.rglob("*") if kept(p))


def _gc(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([conftest.GPUHOOK, "gc"], env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)},
                          capture_output=True, text=True, timeout=60, check=False)


def _with_poststop(spec: dict[str, Any]) -> None:
    """Hook mode as hooks.d registers it: gpuhook at poststop too (tuning is refused where nothing would undo it)."""
    prestart = (spec.get("hooks") or {}).get("prestart") or []
    if prestart:
        spec["hooks"]["poststop"] = [{**prestart[0], "args": ["gpuhook", "hook", "poststop"]}]


@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_a_soak_leaves_state_dir_as_small_as_one_container_leaves_it(mixed_host: str, run_container: Run,
                                                                      tmp_path: Path, mode: str) -> None:
    state = tmp_path / "state"
    config = tmp_path / "c.toml"
    text = f'host_root = "{mixed_host}"\nruntime = "runc"\nstate_dir = "{state}"\n'
    seen = []
    for i in range(12):  # bounded: each cycle is one real container with tuning, started and stopped
        gpus = str(i % 2)
        r = run_container(mixed_host, "true", {**NV, "gpuhook.dev/gpus": gpus, "gpuhook.dev/clocks": "1500"},
                          config=text, mode=mode, spec_edit=_with_poststop)
        assert r.rc == 0, r.err
        config.write_text(text)
        assert _gc(config).returncode == 0
        seen.append(_files(state))
    assert len(seen[-1]) <= max(len(s) for s in seen[:2]), "state_dir grows with the containers it has seen"
    assert {f for f in seen[-1] if "-procfs" not in f} == {f for f in seen[1] if "-procfs" not in f}
    assert not [f for f in seen[-1] if f.startswith("containers/")], "records of stopped containers are left"
    assert len([f for f in seen[-1] if "-procfs" in f]) <= 2  # one per GPU set, shared, until no one needs it
    time.sleep(6)  # past the moment between a copy and the record that names it
    assert _gc(config).returncode == 0
    assert not [f for f in _files(state) if "-procfs" in f], "procfs copies no container uses are left"


def test_what_a_killed_writer_left_is_swept(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "containers").mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = [state / f".ledger.json.{dead.pid}.tmp", state / "containers" / f".web@r1.json.{dead.pid}.tmp",
            state / "nvidia-procfs" / f".abcd-3.{dead.pid}"]
    left[-1].mkdir(parents=True)
    for p in left[:2]:
        p.write_text("partial")
    mine = state / f".ledger.json.{os.getpid()}.tmp"  # a live writer's: kept
    mine.write_text("being written")
    config = tmp_path / "c.toml"
    config.write_text(f'state_dir = "{state}"\n')
    done = _gc(config)
    assert done.returncode == 0, done.stderr
    assert not any(p.exists() for p in left) and mine.exists()


def test_a_full_state_dir_is_one_line_and_changes_nothing(mixed_host: str, run_container: Run,
                                                          tmp_path: Path) -> None:
    state = tmp_path / "full"
    state.mkdir(mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(state)], check=True)
    try:
        with open(state / "filler", "wb") as f, contextlib.suppress(OSError):  # fill it to the last block
            f.write(b"x" * (1 << 20))
        text = f'host_root = "{mixed_host}"\nruntime = "runc"\nstate_dir = "{state}"\n'
        r = run_container(mixed_host, "true", NV, config=text)
        assert r.rc != 0
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and "No space left on device" in lines[0] and "internal error" not in lines[0]
        assert r.spec_after == r.spec_before
        config = tmp_path / "c.toml"
        config.write_text(text)
        done = _gc(config)
        assert "Traceback" not in done.stderr
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)
