"""gpuhook-createhook's CDI mode (root "-"): the container's root read from the OCI state on stdin and its bundle's
config.json, as runc hands them to a createContainer hook. The root it settles on is shown by the --proc copy's
error for a root that does not exist (nothing is mounted); decoys in annotations and env never move it, and a state
or config it cannot trust is one line and exit 1, never a hang."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from . import conftest


def _helper() -> str:
    return str(Path(conftest.GPUHOOK).parent / "gpuhook-createhook")


def _run(state: bytes) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_helper(), "-", "--proc", "/nonexistent", "/proc/driver/nvidia"], input=state.decode(),
                          capture_output=True, text=True, timeout=10, check=False)


def _bundle(tmp_path: Path, root: object) -> Path:
    bundle = tmp_path / "b"
    bundle.mkdir()
    spec = {"ociVersion": "1.0.2", "annotations": {"root": '{"path": "/decoy"}', "path": "/decoy"},
            "process": {"env": ['root={"path":"/decoy"}']}, "mounts": [{"destination": "/root", "source": "/x"}],
            "root": root, "linux": {}}
    (bundle / "config.json").write_text(json.dumps(spec, indent=1))
    return bundle


@pytest.mark.parametrize(("root", "expect"), [
    ({"path": "rootfs"}, "{bundle}/rootfs"),
    ({"readonly": True, "path": "/abs/root"}, "/abs/root"),
    ({"path": 'odd "name"\\dir'}, '{bundle}/odd "name"\\dir'),
], ids=["relative", "absolute", "escapes"])
def test_the_root_comes_from_the_bundle(tmp_path: Path, root: dict[str, object], expect: str) -> None:
    bundle = _bundle(tmp_path, root)
    state = {"ociVersion": "1.0.2", "id": "x", "status": "creating", "pid": 1,
             "annotations": {"bundle": "/decoy"}, "bundle": str(bundle)}
    done = _run(json.dumps(state).encode())
    assert done.returncode == 1
    assert done.stderr.strip() == f"gpuhook-createhook: cannot open {expect.format(bundle=bundle)}: No such file or " \
                                  "directory"


@pytest.mark.parametrize("case", ["no bundle", "relative bundle", "config a FIFO", "no root", "\\u in the root"])
def test_what_it_cannot_trust_is_one_line(tmp_path: Path, case: str) -> None:
    bundle = _bundle(tmp_path, {"path": "\u00e9t\u00e9" if case == "\\u in the root" else "rootfs"})
    if case == "\\u in the root":
        text = (bundle / "config.json").read_text()
        assert "\\u00e9" in text  # json.dumps escapes it: the helper refuses \u rather than guess
    if case == "config a FIFO":
        (bundle / "config.json").unlink()
        os.mkfifo(bundle / "config.json")
    if case == "no root":
        (bundle / "config.json").write_text('{"ociVersion": "1.0.2", "rootx": {"path": "rootfs"}}')
    state = {"id": "x", "bundle": "rel/b" if case == "relative bundle" else str(bundle)}
    if case == "no bundle":
        state = {"id": "x", "annotations": {"bundle": str(bundle)}}
    done = _run(json.dumps(state).encode())
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("gpuhook-createhook: ") and "cannot open /" not in line, line


def test_the_mount_point_is_made_as_the_python_refresh_makes_it(tmp_path: Path) -> None:
    """After a reboot state_dir may be gone, several levels deep: made (0700), as os.makedirs would; a state_dir
    others may write is refused, as apply/state_dir.check refuses it."""
    bundle = _bundle(tmp_path, {"path": "rootfs"})
    (bundle / "rootfs").mkdir()
    state = json.dumps({"id": "x", "bundle": str(bundle)})
    deep = tmp_path / "run" / "gpuhook" / "ldcache-root"
    done = subprocess.run([_helper(), "-", "--ldcache", str(deep), "/bin/true", "0"], input=state,
                          capture_output=True, text=True, timeout=10, check=False)
    assert done.returncode == 0, done.stderr
    assert deep.is_dir() and (deep.stat().st_mode & 0o777) == 0o700
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o777)
    open_dir.chmod(0o777)
    done = subprocess.run([_helper(), "-", "--ldcache", str(open_dir / "ldcache-root"), "/bin/true", "0"],
                          input=state, capture_output=True, text=True, timeout=10, check=False)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("gpuhook-createhook: not a directory of root's alone") and str(open_dir) in line, line
