from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook.errors import DiscoveryError
from gpuhook.host.root import Root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/real.so.1").write_text("x")
    os.symlink("real.so.1", tmp_path / "usr/lib/rel.so")
    os.symlink("/usr/lib/real.so.1", tmp_path / "usr/lib/abs.so")
    os.symlink("../../../../../../etc/passwd", tmp_path / "usr/lib/dotdot")
    os.symlink("/etc", tmp_path / "etc-link")
    os.symlink("loop", tmp_path / "loop")
    return tmp_path


CASES = [
    ("plain", "/usr/lib/real.so.1", "usr/lib/real.so.1"),
    ("relative link", "/usr/lib/rel.so", "usr/lib/real.so.1"),
    ("absolute link stays inside", "/usr/lib/abs.so", "usr/lib/real.so.1"),
    ("dotdot link clamped at root", "/usr/lib/dotdot", "etc/passwd"),
    ("absolute dir link stays inside", "/etc-link/shadow", "etc/shadow"),
    ("dotdot path clamped", "/../../usr/lib/real.so.1", "usr/lib/real.so.1"),
    ("missing", "/nope/x", "nope/x"),
]


@pytest.mark.parametrize(("path", "expect"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_resolve_never_leaves_root(tree: Path, path: str, expect: str) -> None:
    assert Root(str(tree)).resolve(path) == str(tree / expect)


def test_loop_is_an_error(tree: Path) -> None:
    with pytest.raises(DiscoveryError, match="too many levels"):
        Root(str(tree)).resolve("/loop")


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="does not exist"):
        Root(str(tmp_path / "absent"))


def test_to_host(tree: Path) -> None:
    root = Root(str(tree))
    assert root.to_host(str(tree / "usr/lib/real.so.1")) == "/usr/lib/real.so.1"
    with pytest.raises(DiscoveryError):
        root.to_host("/etc/passwd")
