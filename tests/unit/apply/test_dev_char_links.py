"""/dev/char links to the GPUs' nodes: which are wanted (pure), and making them idempotently on a fake host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook.apply.dev_char_links import Link, create, state, wanted
from gpuhook.cli.admin import main
from gpuhook.edits import DeviceNode
from gpuhook.host.root import Root
from gpuhook.vendors.discover import discover

from ...conftest import FakeHost


def _node(path: str, major: int, minor: int, kind: str = "c") -> DeviceNode:
    return DeviceNode(path=path, kind=kind, major=major, minor=minor, mode=0o666, uid=0, gid=0)


def test_wanted_one_link_per_device_relative_to_its_folder() -> None:
    nodes = [_node("/dev/nvidia1", 195, 1), _node("/dev/dri/renderD128", 226, 128), _node("/dev/nvidia0", 195, 0),
             _node("/dev/nvidia-caps/nvidia-cap1", 237, 1), _node("/dev/also-nvidia0", 195, 0),
             _node("/dev/sda", 8, 0, "b"), _node("/elsewhere/x", 1, 1)]
    assert [(link.path, link.target, link.node) for link in wanted(nodes)] == [
        ("/dev/block/8:0", "../sda", "/dev/sda"),
        ("/dev/char/195:0", "../also-nvidia0", "/dev/also-nvidia0"),  # one per number: the first by path
        ("/dev/char/195:1", "../nvidia1", "/dev/nvidia1"),
        ("/dev/char/226:128", "../dri/renderD128", "/dev/dri/renderD128"),
        ("/dev/char/237:1", "../nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap1"),
    ]


def _links(host: str) -> list[Link]:
    inventory = discover(Root(host))
    return wanted(n for v in inventory.vendors for n in (*v.shared_nodes, *(n for g in v.gpus for n in g.nodes)))


def test_create_is_idempotent_and_mends_what_is_wrong(fake_host: FakeHost) -> None:
    host = fake_host(nvidia=2)
    root, links = Root(host), _links(host)
    assert {link.path for link in links} >= {"/dev/char/195:0", "/dev/char/195:1", "/dev/char/195:255"}
    assert {what for _, what in create(root, links, dry_run=True)} == {"created"}
    assert not os.path.exists(f"{host}/dev/char")  # a dry run makes nothing
    assert {what for _, what in create(root, links)} == {"created"}
    assert os.readlink(f"{host}/dev/char/195:0") == "../nvidia0"
    assert os.stat(f"{host}/dev/char/195:0").st_rdev == os.makedev(195, 0)  # it leads to the node
    assert {what for _, what in create(root, links)} == {"ok"}
    os.unlink(f"{host}/dev/char/195:1")
    os.symlink("../nvidia0", f"{host}/dev/char/195:1")  # the wrong device
    os.unlink(f"{host}/dev/char/195:255")
    os.symlink("/dev/nvidiactl", f"{host}/dev/char/195:255")  # another spelling of the right one (as udev's)
    done = {link.path: what for link, what in create(root, links)}
    assert done["/dev/char/195:1"] == "replaced" and os.readlink(f"{host}/dev/char/195:1") == "../nvidia1"
    assert done["/dev/char/195:255"] == "ok" and os.readlink(f"{host}/dev/char/195:255") == "/dev/nvidiactl"
    assert not [p for p in os.listdir(f"{host}/dev/char") if "gpuhook" in p]  # no temporary left


@pytest.mark.parametrize(("make", "expected"), [
    (lambda p: None, "missing"), (lambda p: os.symlink("../nowhere", p), "wrong"),
    (lambda p: Path(p).write_text("x"), "blocked"), (lambda p: os.symlink("../nvidia0", p), "ok"),
], ids=["missing", "dangling", "a-file", "ok"])
def test_state(fake_host: FakeHost, make, expected: str) -> None:  # type: ignore[no-untyped-def]
    host = fake_host(nvidia=1)
    os.makedirs(f"{host}/dev/char")
    make(f"{host}/dev/char/195:0")
    link = Link(path="/dev/char/195:0", target="../nvidia0", node="/dev/nvidia0", kind="c", major=195, minor=0)
    assert state(Root(host), link) == expected
    if expected == "blocked":
        assert create(Root(host), [link]) == [(link, "blocked")]
        assert Path(f"{host}/dev/char/195:0").read_text() == "x"  # left alone


def test_the_command(fake_host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    host = fake_host(nvidia=1, amd=1)
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path / "state"}"\n')
    monkeypatch.setenv("GPUHOOK_CONFIG", str(config))
    assert main(["system", "create-dev-char-links", "--dry-run"]) == 0
    assert "would make /dev/char/195:0 -> ../nvidia0" in capsys.readouterr().out
    assert main(["system", "create-dev-char-links"]) == 0
    out = capsys.readouterr().out
    assert "created    /dev/char/195:0 -> ../nvidia0" in out and "/dev/char/226:128 -> ../dri/renderD128" in out
    assert main(["system", "create-dev-char-links"]) == 0
    assert set(line.split()[0] for line in capsys.readouterr().out.splitlines()) == {"ok"}
