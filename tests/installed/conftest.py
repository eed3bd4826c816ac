"""The product as users install it, from a clean export of this tree (`git archive`, with uncommitted changes):
install.sh into private prefixes (with and without the native front ends), the PyInstaller binary packed into
the .deb and installed by dpkg into a scratch root. Nothing here runs the checkout's code in front of a
container; the checkout's simulator only builds the fake hosts (a fixture, as a GPU would be).

Each flavour is one way a host can be served:
  native  install.sh; the native front ends, the warm helper absent (the direct path: Python behind them)
  warm    the same installation with `gpuhook warm` running (its workers serve the native front ends)
  python  install.sh --no-native (no C compiler: every entry point is Python)
  deb     the .deb's single binary (PyInstaller) with the native front ends beside it
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import require_for_tier

REPO = Path(__file__).parents[2]
FLAVOURS = ("native", "warm", "python", "deb")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    require_for_tier(items, "installed", ("runc", "busybox", "cc", "strace", "git", "dpkg-deb"))


def _run(argv: list[str], what: str, timeout: int = 900, **kwargs: object) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return str(done.stdout)


@pytest.fixture(scope="session")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This tree as `git archive` exports it: the files git would commit (tracked, and new ones it does not ignore),
    as they are now: a tree written through a scratch index, leaving the checkout's own index alone."""
    work = tmp_path_factory.mktemp("export")
    dest = work / "gpuhook"
    dest.mkdir()
    env = {**os.environ, "GIT_INDEX_FILE": str(work / "index")}
    _run(["git", "-C", str(REPO), "read-tree", "HEAD"], "git read-tree", env=env)
    _run(["git", "-C", str(REPO), "add", "-A"], "git add -A", env=env)
    tree = _run(["git", "-C", str(REPO), "write-tree"], "git write-tree", env=env).strip()
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", tree], stdout=subprocess.PIPE)
    _run(["tar", "-x", "-C", str(dest)], "unpacking the export", stdin=archive.stdout)
    assert archive.wait() == 0
    return dest


@dataclass
class Product:
    """One installed gpuhook: where its commands are and how a caller reaches it."""

    flavour: str
    bindir: Path  # where the engine finds gpuhook-runtime (install.sh's bin dir, or the .deb's /opt/gpuhook)
    home: Path  # the installation's own files (the virtualenv's bin, or /opt/gpuhook)
    sock: Path  # the warm helper's socket (absent unless the flavour is "warm")
    work: Path

    def cmd(self, name: str) -> str:
        return str(self.bindir / name)

    def env(self, config: Path) -> dict[str, str]:
        """What an engine gives the runtime: PATH and the config; the socket of this flavour's helper (if any)."""
        return {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config), "GPUHOOK_WARM_SOCKET": str(self.sock)}


def _install_sh(src: Path, work: Path, *flags: str) -> tuple[Path, Path]:
    env = {**os.environ, "GPUHOOK_PREFIX": str(work / "opt"), "GPUHOOK_BINDIR": str(work / "bin"),
           "GPUHOOK_CONFIG": str(work / "config.toml"), "GPUHOOK_UNITDIR": str(work / "units")}
    out = _run(["bash", str(src / "install.sh"), *flags], f"install.sh {' '.join(flags)}", env=env)
    assert "gpuhook install [" in out  # it says what it is doing
    return work / "bin", work / "opt/bin"


@pytest.fixture(scope="session")
def binary(export: Path) -> Path:
    """The single binary (PyInstaller, one-dir) that packaging/build-binary.sh builds from the export."""
    _run(["bash", str(export / "packaging/build-binary.sh")], "build-binary.sh",
         env={**os.environ, "PYTHON": sys.executable})
    return export / "dist/gpuhook"


@pytest.fixture(scope="session")
def deb(export: Path, binary: Path) -> Path:
    """The .deb packaging/build-deb.sh makes of that binary."""
    _run(["bash", str(export / "packaging/build-deb.sh")], "build-deb.sh")
    (found,) = (export / "dist").glob("gpuhook_*.deb")
    return found


def dpkg_install(deb: Path, work: Path) -> Path:
    """`dpkg -i` into a scratch root (maintainer scripts acting on DPKG_ROOT); the root."""
    root = work / "root"
    (root / "var/lib/dpkg/updates").mkdir(parents=True)
    (root / "var/lib/dpkg/info").mkdir()
    (root / "var/lib/dpkg/status").touch()
    _run(["dpkg", f"--root={root}", "--force-depends", "--force-script-chrootless", "-i", str(deb)], "dpkg -i")
    return root


class _Helper:
    """`gpuhook warm` of an installation, on a private socket, in a session of its own; SIGTERM stops it."""

    def __init__(self, gpuhook: str, sock: Path, said: Path) -> None:
        sock.parent.mkdir(mode=0o700, exist_ok=True)
        with open(said, "wb") as out:
            self.proc = subprocess.Popen([gpuhook, "warm", "--socket", str(sock)], stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, env={"PATH": os.environ["PATH"]},
                                         start_new_session=True)
        for _ in range(400):
            if sock.exists() or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        assert self.proc.poll() is None and sock.exists(), f"the warm helper did not start: {said.read_text()}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def installs(export: Path, deb: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each installation, made once: install.sh (native), install.sh --no-native, the .deb."""
    root = dpkg_install(deb, tmp_path_factory.mktemp("deb"))
    return {"native": _install_sh(export, tmp_path_factory.mktemp("native")),
            "python": _install_sh(export, tmp_path_factory.mktemp("python"), "--no-native"),
            "deb": (root / "opt/gpuhook", root / "opt/gpuhook")}


@pytest.fixture(scope="module", params=FLAVOURS)
def product(request: pytest.FixtureRequest, installs: dict[str, tuple[Path, Path]],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Product]:
    flavour: str = request.param
    bindir, home = installs["native" if flavour == "warm" else flavour]
    work = tmp_path_factory.mktemp(f"use-{flavour}")
    sock = work / "run" / "warm.sock"
    helper = _Helper(str(bindir / "gpuhook"), sock, work / "warm.out") if flavour == "warm" else None
    try:
        yield Product(flavour, bindir, home, sock, work)
    finally:
        if helper:
            helper.stop()
