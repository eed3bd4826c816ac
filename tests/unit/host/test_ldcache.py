from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpuhook.host import ldcache
from gpuhook.simulator.stub_libs import build


def test_reads_a_cache_written_by_the_real_ldconfig(tmp_path: Path) -> None:
    lib = tmp_path / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    so = build("generic.c", "libfoo.so.1.2.3", soname="libfoo.so.1", defines={"STUB_NAME": '"foo"'})
    (lib / "libfoo.so.1.2.3").write_bytes(Path(so).read_bytes())
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/ld.so.conf").write_text("/usr/lib/x86_64-linux-gnu\n")
    subprocess.run(["/sbin/ldconfig", "-r", str(tmp_path)], check=True)
    entries = ldcache.parse((tmp_path / "etc/ld.so.cache").read_bytes())
    assert ("libfoo.so.1", "/usr/lib/x86_64-linux-gnu/libfoo.so.1") in entries
    assert os.readlink(lib / "libfoo.so.1") == "libfoo.so.1.2.3"


def test_other_architectures_are_skipped(tmp_path: Path) -> None:
    data = Path("/etc/ld.so.cache").read_bytes()
    assert ldcache.parse(data) != []
    assert ldcache.parse(data, required=0x0A00 if ldcache.arch_flag() != 0x0A00 else 0x0300) == []


def test_garbage_and_truncation_give_nothing_or_a_prefix() -> None:
    assert ldcache.parse(b"") == []
    assert ldcache.parse(b"not a cache at all") == []
    data = Path("/etc/ld.so.cache").read_bytes()
    full = ldcache.parse(data)
    assert ldcache.parse(data[:200]) == full[:len(ldcache.parse(data[:200]))]
