"""The product as users install it, from a clean export of this tree (`git archive`, with uncommitted changes):
install.sh into private prefixes (with and without the native front ends), the self-contained build packed into
the .deb and the .rpm and installed by dpkg and rpm into scratch roots, and (other_hosts.py) into roots of other
distributions. Nothing here runs the checkout's code in front of a container; the checkout's simulator only builds
the fake hosts (a fixture, as a GPU would be).

Each flavour is one way a host can be served:
  native  install.sh; the native front ends, the warm helper absent (the direct path: Python behind them)
  warm    the same installation with `gpuhook warm` running (its workers serve the native front ends)
  python  install.sh --no-native (no C compiler: every entry point is Python)
  deb     the .deb's self-contained build (its own Python; static native front ends), dpkg into a scratch root
  rpm     the same build from the .rpm, rpm into a scratch root
  debian11, debian13   the .deb installed by the root's own dpkg into a Debian 11 / 13 root (hosts.py), run there
                       by that root's runc: glibc 2.31 and 2.41, and no Python gpuhook could use (3.9) or none
  debian11-warm        the same Debian 11 installation with `gpuhook warm` running there
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import require_for_tier
from . import hosts

REPO = Path(__file__).parents[2]
FLAVOURS = ("native", "warm", "python", "deb", "rpm", "debian11", "debian11-warm", "debian13")
ROOTS = {"debian11": "bullseye", "debian13": "trixie"}  # the flavours on other hosts, and their Debian suite


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    require_for_tier(items, "installed", ("runc", "busybox", "cc", "strace", "git", "dpkg-deb", "rpm", "rpmbuild",
                                          "debootstrap", "qemu-aarch64-static", "readelf"))


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
    runner: tuple[str, ...] = ()  # what runs a command on the flavour's host (hosts.Host.runner), () here
    root: Path = Path("/")  # that host's root as seen from here

    def cmd(self, name: str) -> str:
        return str(self.bindir / name)

    def argv(self, name: str, *args: str) -> list[str]:
        """A command line that runs the product's executable `name` on the flavour's host."""
        return [*self.runner, self.cmd(name), *args]

    def host_argv(self, *argv: str) -> list[str]:
        """A command line that runs a program of the flavour's host (runc, found on its PATH)."""
        return [*self.runner, *argv]

    def here(self, path: Path) -> Path:
        """A path of the flavour's host, as this machine reaches it."""
        return self.root / path.relative_to("/") if self.runner else path

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
def release(export: Path) -> Path:
    """Every release artifact packaging/build-release.sh builds from the export, both architectures: the dist dir."""
    _run(["bash", str(export / "packaging/build-release.sh")], "build-release.sh", timeout=1800,
         env={**os.environ, "PYTHON": "/usr/bin/python3"})
    return export / "dist"


@pytest.fixture(scope="session")
def binary(release: Path) -> Path:
    """The self-contained build for this machine (packaging/build-bundle.sh)."""
    (found,) = release.glob(f"gpuhook-*-{os.uname().machine}")
    return found


@pytest.fixture(scope="session")
def deb(release: Path) -> Path:
    """The .deb packaging/build-deb.sh makes of that build."""
    (found,) = release.glob("gpuhook_*_amd64.deb")
    return found


@pytest.fixture(scope="session")
def rpm(release: Path) -> Path:
    """The .rpm packaging/build-rpm.sh makes of that build."""
    (found,) = release.glob("gpuhook-*.x86_64.rpm")
    return found


def dpkg_install(deb: Path, work: Path) -> Path:
    """`dpkg -i` into a scratch root (maintainer scripts acting on DPKG_ROOT); the root."""
    root = work / "root"
    (root / "var/lib/dpkg/updates").mkdir(parents=True)
    (root / "var/lib/dpkg/info").mkdir()
    (root / "var/lib/dpkg/status").touch()
    _run(["dpkg", f"--root={root}", "--force-depends", "--force-script-chrootless", "-i", str(deb)], "dpkg -i")
    return root


def rpm_install(rpm: Path, work: Path) -> Path:
    """`rpm -i` into a scratch root (its own database; no scriptlets: the root has no /bin/sh to run them); the root."""
    root = work / "root"
    root.mkdir()
    _run(["rpm", f"--root={root}", "--dbpath=/var/lib/rpm", "--noscripts", "--nodeps", "-i", str(rpm)], "rpm -i")
    return root


class _Helper:
    """`gpuhook warm` of an installation, on a private socket, in a session of its own; SIGTERM stops it."""

    def __init__(self, argv: list[str], sock: Path, said: Path) -> None:
        sock.parent.mkdir(mode=0o700, exist_ok=True)
        with open(said, "wb") as out:
            self.proc = subprocess.Popen([*argv, "warm", "--socket", str(sock)], stdin=subprocess.DEVNULL,
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


class Installs:
    """Each installation, made once, when a test first needs it: install.sh (native), install.sh --no-native, the
    .deb and the .rpm into scratch roots, the .deb into other Debian releases' roots by their own dpkg."""

    def __init__(self, export: Path, release: Path, factory: pytest.TempPathFactory) -> None:
        self.export, self.release, self.factory = export, release, factory
        self.made: dict[str, tuple[Path, Path, tuple[str, ...], Path]] = {}
        self.hosts: list[hosts.Host] = []

    def __getitem__(self, flavour: str) -> tuple[Path, Path, tuple[str, ...], Path]:
        """(bin dir, home, runner, root) of the flavour's installation."""
        if flavour not in self.made:
            self.made[flavour] = self._make(flavour)
        return self.made[flavour]

    def _make(self, flavour: str) -> tuple[Path, Path, tuple[str, ...], Path]:
        mktemp = self.factory.mktemp
        if flavour in ("native", "python"):
            bindir, home = _install_sh(self.export, mktemp(flavour), *(("--no-native",) if flavour == "python" else ()))
            return bindir, home, (), Path("/")
        if flavour in ("deb", "rpm"):
            (package,) = self.release.glob("gpuhook_*_amd64.deb" if flavour == "deb" else "gpuhook-*.x86_64.rpm")
            root = (dpkg_install if flavour == "deb" else rpm_install)(package, mktemp(flavour))
            return root / "opt/gpuhook/bin", root / "opt/gpuhook/bin", (), Path("/")
        (deb,) = self.release.glob("gpuhook_*_amd64.deb")
        root = hosts.copy_root(hosts.debian_root(ROOTS[flavour]), mktemp(flavour) / "root")
        host = hosts.Host(root, self.factory.getbasetemp(), mktemp(f"{flavour}-run"))  # the basetemp at its path
        self.hosts.append(host)
        runner = tuple(host.runner())
        _run([*runner, "dpkg", "-i", str(deb)], f"dpkg -i on {flavour}")
        return Path("/opt/gpuhook/bin"), Path("/opt/gpuhook/bin"), runner, root

    def stop(self) -> None:
        """End the other hosts' namespaces."""
        for host in self.hosts:
            host.stop()


@pytest.fixture(scope="session")
def installs(export: Path, release: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installs]:
    made = Installs(export, release, tmp_path_factory)
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="module", params=FLAVOURS)
def product(request: pytest.FixtureRequest, installs: Installs,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Product]:
    flavour: str = request.param
    warm = flavour == "warm" or flavour.endswith("-warm")
    bindir, home, runner, root = installs[{"warm": "native"}.get(flavour, flavour.removesuffix("-warm"))]
    work = tmp_path_factory.mktemp(f"use-{flavour}")
    sock = work / "run" / "warm.sock"
    product = Product(flavour, bindir, home, sock, work, runner, root)
    helper = _Helper(product.argv("gpuhook"), sock, work / "warm.out") if warm else None
    try:
        yield product
    finally:
        if helper:
            helper.stop()
