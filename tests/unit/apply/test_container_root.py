"""Both resolvers (openat2 RESOLVE_IN_ROOT and the O_NOFOLLOW walk) against the same hostile trees, reading
(gpuhook.host.image) and creating (gpuhook.apply.container_root)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from gpuhook.apply.container_root import WritableRoot
from gpuhook.errors import UnsafePathError

MODES = pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "walk"])


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "usr/lib").mkdir(parents=True)
    outside.mkdir()
    (root / str(outside).lstrip("/")).mkdir(parents=True)  # the same absolute path, inside the image
    os.symlink(str(outside), root / "usr/lib/abs-link")
    os.symlink("../../../../../../../../../../" + str(outside).lstrip("/"), root / "usr/lib/climb-link")
    os.symlink("/nonexistent", root / "dangling")
    (root / "etc").mkdir()
    (root / "etc/real").write_text("x")
    os.symlink(str(tmp_path / "host-secret"), root / "etc/file-link")
    (tmp_path / "host-secret").write_text("secret")
    return root, outside


CREATE = ["/usr/lib/abs-link/libcuda.so.1", "/usr/lib/climb-link/libcuda.so.1", "/usr/lib/new/dir/libcuda.so.1"]


@MODES
@pytest.mark.parametrize("path", CREATE, ids=["absolute link", "../ link", "new dirs"])
def test_creation_lands_inside(tree: tuple[Path, Path], openat2: bool, path: str) -> None:
    root, outside = tree
    with WritableRoot(str(root), openat2) as r:
        os.close(r.create_file(path))
    assert list(outside.iterdir()) == []
    found = [p for p in root.rglob("libcuda.so.1")]
    assert len(found) == 1 and stat.S_ISREG(found[0].lstat().st_mode)


@MODES
def test_dangling_link_refused(tree: tuple[Path, Path], openat2: bool) -> None:
    with WritableRoot(str(tree[0]), openat2) as r, pytest.raises(UnsafePathError, match="dangling"):
        r.create_file("/dangling/x")


@MODES
def test_symlink_as_the_file_itself_is_refused(tree: tuple[Path, Path], openat2: bool) -> None:
    with WritableRoot(str(tree[0]), openat2) as r, pytest.raises(UnsafePathError, match="not a regular file"):
        r.create_file("/etc/file-link")
    assert (tree[0].parent / "host-secret").read_text() == "secret"


@MODES
def test_reading_follows_links_inside_only(tree: tuple[Path, Path], openat2: bool) -> None:
    with WritableRoot(str(tree[0]), openat2) as r:
        assert r.read_text("/usr/lib/../../etc/real") == "x"
        with pytest.raises(FileNotFoundError):
            r.read_text("/etc/file-link")  # the host file is not reachable from inside
        assert r.listdir("/nope") == []


@MODES
def test_mknod_and_existing_nodes(tree: tuple[Path, Path], openat2: bool) -> None:
    root, _ = tree
    with WritableRoot(str(root), openat2) as r:
        r.mknod("/dev/nvidia0", "c", 1, 3, 0o660, 0, 44)
        r.mknod("/dev/nvidia0", "c", 1, 3, 0o660, 0, 44)  # the same node again is fine
        st = (root / "dev/nvidia0").lstat()
        assert stat.S_ISCHR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == 44
        with pytest.raises(UnsafePathError, match="not device 1:5"):
            r.mknod("/dev/nvidia0", "c", 1, 5, 0o660, 0, 44)


@MODES
def test_dotdot_in_a_created_path_is_refused(tree: tuple[Path, Path], openat2: bool) -> None:
    with WritableRoot(str(tree[0]), openat2) as r, pytest.raises(UnsafePathError, match=r"'\.\.'"):
        r.make_dirs("/usr/../../x")


@pytest.mark.parametrize("err", [errno.EPERM, errno.EOVERFLOW, errno.EINVAL])
def test_a_node_the_kernel_refuses_is_bound_from_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          err: int) -> None:
    """In a user namespace mknod (or the chown after it) fails, whatever the errno: the host's node is bound."""
    from gpuhook.apply import live
    from gpuhook.edits import DeviceNode

    (tmp_path / "root/dev").mkdir(parents=True)
    bound: list[str] = []
    monkeypatch.setattr(live, "bind_mount", lambda fd, root, target, readonly=True: bound.append(target))

    def refuse(*_: object, **__: object) -> None:
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(os, "mknod", refuse)
    host = os.open("/dev/null", os.O_PATH)
    try:
        with WritableRoot(str(tmp_path / "root")) as root:
            live._node(root, DeviceNode(path="/dev/nvidia0", kind="c", major=195, minor=0, mode=0o666, uid=0, gid=0), 0,
                       host)
    finally:
        os.close(host)
    assert bound == ["/dev/nvidia0"] and not (tmp_path / "root/dev/nvidia0").exists()
