"""Other hosts for the installed tier: roots of other Debian releases made with debootstrap (cached by key), and a
way to run commands as if that root were the host's own: one mount namespace per host, whose root is pivoted to it,
with the host's /proc, /sys (cgroups included) and /dev, a /run of the test's, and the test's own directory at the
same path inside, so that simulated GPU hosts and bundles made by the fixtures mean the same paths on both sides.
Every command of that host enters the same namespace (nsenter), as every process on a real host shares one.
The root's own dpkg installs the product there and the root's own runc runs its containers.

Debian 11 (bullseye: glibc 2.31, Python 3.9) stands for every host older than the CI machine, Debian 13 (trixie:
glibc 2.41, Python 3.13) for every newer one. The roots are minbase with runc (and python3 on Debian 11, for
install.sh's refusal there); the mirror is the one this machine's apt uses."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

# suite -> what debootstrap adds to minbase
SUITES = {"bullseye": ("runc", "python3"), "trixie": ("runc",), "bookworm": ("runc",)}
_RECIPE = "minbase 1"  # bump when the way roots are made changes

ENTER = r"""
set -e
root=$1 work=$2 run=$3; shift 3
mount --make-rprivate /
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mkdir -p "$run" "$root$work" && mount --bind "$run" "$root/run" && mount --bind "$work" "$root$work"
cd "$root"
mkdir -p .pivot && pivot_root . .pivot && umount -l /.pivot
cd /
echo ready
exec sleep 2147483647
"""


def _mirror() -> str:
    """The Debian mirror this machine's apt uses (its sources), for debootstrap."""
    for path in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        if os.path.exists(path):
            text = Path(path).read_text()
            found = re.search(r"^URIs:\s*(\S+/debian)\s*$", text, re.M) or \
                re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)\s", text, re.M)
            if found:
                return found.group(1)
    raise RuntimeError("no Debian mirror in this machine's apt sources: debootstrap needs one")


def cache_dir() -> Path:
    """Where built roots are kept between runs (beside packaging/build-bundle.sh's cache)."""
    base = os.environ.get("GPUHOOK_BUILD_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpuhook-build")
    return Path(base) / "roots"


def debian_root(suite: str) -> Path:
    """A debootstrap root of `suite`, built once per machine and key (a minute or two each); never written to."""
    include = SUITES[suite]
    key = hashlib.sha256(f"{suite} {include} {_RECIPE}".encode()).hexdigest()[:12]
    done = cache_dir() / f"{suite}-{key}"
    if (done / ".complete").exists():
        return done
    tmp = done.with_name(done.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(include)}", suite, str(tmp),
                           _mirror()], capture_output=True, text=True, timeout=1200, check=False)
    assert made.returncode == 0, f"debootstrap {suite} failed:\n{made.stdout[-3000:]}\n{made.stderr[-3000:]}"
    (tmp / ".complete").touch()
    shutil.rmtree(done, ignore_errors=True)
    tmp.rename(done)
    return done


def copy_root(cached: Path, dest: Path) -> Path:
    """A private copy of a cached root, for a test session to install into."""
    subprocess.run(["cp", "-a", str(cached), str(dest)], check=True, timeout=300)
    return dest


class Host:
    """A root made the host of its own mount namespace, held by a process of its own until stop()."""

    def __init__(self, root: Path, work: Path, run: Path) -> None:
        run.mkdir(parents=True, exist_ok=True)
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                                        ENTER, "enter", str(root), str(work), str(run)], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.holder.stdout is not None
        said = self.holder.stdout.readline().strip()
        assert said == "ready", f"{root} could not be entered: {said} {self.holder.stderr.read() if said else ''}"

    def runner(self) -> list[str]:
        """The argv prefix that runs a command on this host (its root, its namespace)."""
        return ["nsenter", "-t", str(self.holder.pid), "-m", "--"]

    def stop(self) -> None:
        """End the namespace (its mounts go with its last process)."""
        self.holder.kill()
        self.holder.wait(10)


def glibc_of(root: Path) -> str:
    """The version of a root's C library (its dpkg database's libc6)."""
    return subprocess.run(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f", "${Version}", "libc6"],
                          capture_output=True, text=True, check=True).stdout.split("-")[0]
