"""gpuhook's ld.so.cache writer against glibc's own ldconfig (differential, randomised, on real ELF files), its
reader against hostile caches, and the container-side write (apply/container_ldcache.py) in a temporary root."""

from __future__ import annotations

import os
import random
import re
import shutil
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from gpuhook.apply import container_ldcache
from gpuhook.apply.ldcache_entries import host_dir_entries
from gpuhook.host import elf_soname, ldcache_splice, ldcache_write
from gpuhook.host.ldcache_write import CacheError

LDCONFIG = shutil.which("ldconfig", path="/sbin:/usr/sbin:/usr/bin:/bin") or "/sbin/ldconfig"
PLACEHOLDER = "libgpuhookplaceholder" + "x" * 60
X86 = 0x0303


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A tiny shared object whose SONAME is a long placeholder, patched per library below (one compiler run)."""
    work = tmp_path_factory.mktemp("elf")
    (work / "f.c").write_text("int gpuhook_probe(void) { return 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{PLACEHOLDER}", "-o", str(work / "t.so"),
                    str(work / "f.c")], check=True, timeout=60)
    return (work / "t.so").read_bytes()


def _library(template: bytes, path: Path, soname: str) -> None:
    assert len(soname) < len(PLACEHOLDER)
    new = soname.encode() + b"\0" * (len(PLACEHOLDER) - len(soname))
    path.write_bytes(template.replace(PLACEHOLDER.encode(), new))


def _listing(cache: Path) -> list[str]:
    """`ldconfig -p` of a cache file: its entry lines."""
    out = subprocess.run([LDCONFIG, "-C", str(cache), "-p"], capture_output=True, text=True, check=True, timeout=30)
    return [line for line in out.stdout.splitlines() if line.startswith("\t")]


def _random_tree(rng: random.Random, template: bytes, root: Path) -> list[str]:
    """Library directories in `root`, listed in its ld.so.conf, with libraries laid out as distributions do: a file
    named by its SONAME, a versioned file with its SONAME link, a development link; SONAMEs repeat across
    directories and their versions exercise numeric comparison. The directories, in ld.so.conf order."""
    dirs = [f"/{rng.choice(['opt', 'usr/local', 'srv'])}/d{i}/lib" for i in range(rng.randint(2, 4))]
    stems = [f"lib{rng.choice(['a', 'b', 'foo', 'foo2', 'x10y', 'z'])}{rng.choice(['', '1', '9', '10', '-2'])}"
             for _ in range(12)]
    for d in dirs:
        where = root / d.lstrip("/")
        where.mkdir(parents=True)
        for stem in rng.sample(stems, rng.randint(1, 8)):
            major = rng.choice(["0", "1", "2", "9", "10", "100", "01"])
            soname = f"{stem}.so.{major}"
            if (where / soname).exists() or (where / f"{stem}.so").exists():
                continue
            layout = rng.choice(["plain", "versioned", "devlink"])
            if layout == "plain":
                _library(template, where / soname, soname)
                continue
            real = f"{soname}.{rng.randint(0, 12)}.{rng.randint(0, 12)}"
            _library(template, where / real, soname)
            (where / soname).symlink_to(real)
            if layout == "devlink":
                (where / f"{stem}.so").symlink_to(soname)
        for level in rng.sample(["x86-64-v2", "x86-64-v3", "x86-64-v4"], rng.randint(0, 2)):  # glibc-hwcaps variants
            sub = where / "glibc-hwcaps" / level
            sub.mkdir(parents=True)
            for lib in rng.sample(sorted(p.name for p in where.glob("lib*.so.*")), 1):
                _library(template, sub / lib, lib.split(".so.")[0] + ".so." + lib.split(".so.")[1].split(".")[0])
    (root / "etc").mkdir()
    (root / "etc/ld.so.conf").write_text("".join(f"{d}\n" for d in dirs))
    return dirs


@pytest.mark.parametrize("seed", range(16), ids=lambda s: f"seed{s}")
def test_the_writer_matches_ldconfig(template: bytes, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "root"
    dirs = _random_tree(rng, template, root)
    libc = Path("/lib/x86_64-linux-gnu/libc.so.6")
    if seed % 2 and libc.exists():  # a real library, with an ABI tag (ldconfig since glibc 2.35 records none)
        shutil.copy(libc, root / dirs[0].lstrip("/") / "libc.so.6")
    mine = ldcache_write.ordered(e for d in dirs for e in host_dir_entries(str(root / d.lstrip("/")), d))
    fmt = ["-c", "compat"] if seed % 4 == 3 else []  # glibc 2.31's default: the old format in front
    subprocess.run([LDCONFIG, "-X", *fmt, "-r", str(root)], check=True, timeout=60, capture_output=True)
    theirs = ldcache_write.read((root / "etc/ld.so.cache").read_bytes())
    # the entries gpuhook lists for the directories (not their glibc-hwcaps subdirectories), in ldconfig's order
    assert [e[:4] for e in mine] == [e[:4] for e in theirs if not e[5]]
    # the order of everything ldconfig wrote, glibc-hwcaps entries included, from a shuffled copy
    again = ldcache_write.ordered(rng.sample(theirs, len(theirs)))
    def rank(entries: list[ldcache_write.Entry]) -> list[tuple[object, ...]]:  # what ties (libfoo.so.01, .so.1) share
        return [(ldcache_write.lib_key(e[1]), e[0], e[5]) for e in entries]

    assert rank(again) == rank(theirs)
    # and the files: ldconfig reads gpuhook's as its own
    for entries, name in ((mine, "mine"), (theirs, "theirs")):
        (tmp_path / name).write_bytes(ldcache_write.build(entries))
    listed = _listing(root / "etc/ld.so.cache")
    if fmt:  # ldconfig -p prints a compat file's glibc-hwcaps names from the wrong base: compare without them
        listed = [re.sub(r', hwcap: "[^"]*"', "", line) for line in listed]
        assert [re.sub(r', hwcap: "[^"]*"', "", line) for line in _listing(tmp_path / "theirs")] == listed
    else:
        assert _listing(tmp_path / "theirs") == listed
    assert _listing(tmp_path / "mine") == [line for line in listed if "glibc-hwcaps" not in line]


def test_the_sort_key_is_libcmp() -> None:
    names = ["libfoo.so.1", "libfoo.so.10", "libfoo.so", "libfoo.so.1a", "lib2x.so", "lib10x.so", "libx.so.01",
             "libx.so.1", "a", "", "b9", "b10", "x", "libfoo.so.1.2", "libfoo.so.1.10"]
    for a in names:
        for b in names:
            want = (ldcache_write.libcmp(a, b) > 0) - (ldcache_write.libcmp(a, b) < 0)
            key_a, key_b = ldcache_write.lib_key(a), ldcache_write.lib_key(b)
            assert want == (key_a > key_b) - (key_a < key_b), (a, b)


def _entries(rng: random.Random, n: int) -> list[ldcache_write.Entry]:
    out = []
    for _ in range(n):
        name = rng.choice(["", "", "", "x86-64-v3", "x86-64-v2"])
        hwcap = (1 << 62 | rng.randint(0, 3) << 32) if name else rng.choice([0, 0, 0, 1 << 3])
        soname = f"lib{rng.choice('abcz')}{rng.randint(0, 20)}.so.{rng.randint(0, 12)}"
        out.append((rng.choice([X86, 0x0003]), soname, f"/lib/{rng.randint(0, 3)}/{soname}",
                    rng.choice([0, 0x030200]), hwcap, name))
    return out


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_a_cache_reads_back_as_written(seed: int) -> None:
    entries = ldcache_write.ordered(_entries(random.Random(seed), 200))
    assert ldcache_write.read(ldcache_write.build(entries)) == entries


def test_an_injected_library_replaces_the_images_of_its_name_and_keeps_the_order() -> None:
    rng = random.Random(7)
    image = ldcache_write.ordered([*_entries(rng, 100), (X86, "libcuda.so.1", "/usr/lib/stub/libcuda.so.1", 0, 0, ""),
                                   (X86, "libcuda.so.1", "/usr/lib/glibc-hwcaps/x86-64-v3/libcuda.so.1", 0,
                                    1 << 62, "x86-64-v3")])
    injected = [(X86, "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54", 0, 0, ""),
                (X86, "libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54", 0, 0, "")]
    merged = ldcache_write.merged(image, injected)
    assert merged == ldcache_write.ordered(merged)
    assert [e[2] for e in merged if e[1] == "libcuda.so.1"] == ["/usr/lib/x86_64-linux-gnu/libcuda.so.550.54"]
    assert len(merged) == len(image) - 2 + 2


@pytest.mark.parametrize("seed", range(12), ids=lambda s: f"seed{s}")
def test_splicing_into_the_images_file_equals_merging_its_entries(seed: int) -> None:
    """The fast path (the image's records and strings copied, the injected ones spliced in) against the plain one
    (every entry decoded, merged, written again): the same entries in the same order, ldconfig's listing alike."""
    rng = random.Random(seed)
    image = ldcache_write.ordered(_entries(rng, rng.randint(0, 300)))
    data = ldcache_write.build(image)
    taken = rng.sample(image, min(len(image), rng.randint(0, 5)))  # SONAMEs the image has too, hwcaps ones included
    injected = [*((e[0], e[1], e[2], e[3], 0, "") for e in _entries(rng, rng.randint(1, 30))),  # no hwcaps of theirs
                *((e[0], e[1], f"/injected/{e[1]}", 0, 0, "") for e in taken)]
    spliced = ldcache_write.read(ldcache_splice.splice(data, injected))
    assert spliced == ldcache_write.merged(image, injected)
    assert spliced == ldcache_write.ordered(spliced)


def test_splicing_keeps_what_ldconfig_lists(template: bytes, tmp_path: Path) -> None:
    root = tmp_path / "root"
    dirs = _random_tree(random.Random(99), template, root)
    subprocess.run([LDCONFIG, "-X", "-r", str(root)], check=True, timeout=60, capture_output=True)
    data = (root / "etc/ld.so.cache").read_bytes()
    image = ldcache_write.read(data)
    injected = [(X86, image[0][1], "/injected/first", 0, 0, ""),
                (X86, "libnew.so.3", "/injected/libnew.so.3", 0, 0, "")]
    (tmp_path / "spliced").write_bytes(ldcache_splice.splice(data, injected))
    (tmp_path / "merged").write_bytes(ldcache_write.build(ldcache_write.merged(image, injected)))
    assert _listing(tmp_path / "spliced") == _listing(tmp_path / "merged")
    assert dirs and any("/injected/first" in line for line in _listing(tmp_path / "spliced"))


def test_elf_identity_reads_the_soname(template: bytes, tmp_path: Path) -> None:
    _library(template, tmp_path / "l.so", "libgpuhook-test.so.3")
    with open(tmp_path / "l.so", "rb") as f:
        assert elf_soname.identity(f.fileno()) == ("libgpuhook-test.so.3", X86, 0)
    (tmp_path / "text").write_bytes(b"\x7fELF" + b"\0" * 100)
    with open(tmp_path / "text", "rb") as f:
        assert elf_soname.identity(f.fileno()) is None


def _valid() -> bytes:
    return ldcache_write.build(ldcache_write.ordered(_entries(random.Random(1), 10)))


def _patched(offset: int, fmt: str, value: int) -> bytes:
    data = bytearray(_valid())
    struct.pack_into(fmt, data, offset, value)
    return bytes(data)


HOSTILE = {
    "truncated-header": _valid()[:30],
    "truncated-entries": _valid()[:100],
    "nlibs-beyond-the-file": _patched(20, "<I", 10**6),
    "key-beyond-the-file": _patched(48 + 4, "<I", 10**7),
    "value-beyond-the-file": _patched(48 + 8, "<I", 10**7),
    "unterminated-string": _valid()[:48 + 10 * 24 + 3],
    "hwcaps-index-out-of-range": _patched(48 + 16, "<Q", 1 << 62 | 999),
    "big-endian": _patched(28, "<B", 1),
    "not-a-cache": b"#!/bin/sh\n" * 10,
    "old-format-count-too-large": b"ld.so-1.7.0\0" + struct.pack("<I", 10**6),
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_malformed_cache_is_refused(data: bytes) -> None:
    with pytest.raises(CacheError):
        ldcache_write.read(data)
    with pytest.raises(CacheError):
        ldcache_splice.splice(data, [(X86, "libcuda.so.1", "/x/libcuda.so.1", 0, 0, "")])


# --- the container side ----------------------------------------------------------------------------------------

def _glibc_root(tmp_path: Path) -> Path:
    root = tmp_path / "rootfs"
    for d in ("etc/ld.so.conf.d", "lib64", "usr/lib/x86_64-linux-gnu"):
        (root / d).mkdir(parents=True)
    (root / "lib64/ld-linux-x86-64.so.2").write_bytes(b"")
    (root / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (root / "etc/ld.so.conf.d/x86_64-linux-gnu.conf").write_text("/usr/lib/x86_64-linux-gnu\n")
    return root


def _host_driver(template: bytes, tmp_path: Path) -> Path:
    host = tmp_path / "host"
    host.mkdir()
    _library(template, host / "libcuda.so.550.54", "libcuda.so.1")
    return host


LIB = "/usr/lib/x86_64-linux-gnu"


def test_the_cache_is_written_into_the_root_with_the_images_entries(template: bytes, tmp_path: Path) -> None:
    root = _glibc_root(tmp_path)
    image = [(X86, "libz.so.1", f"{LIB}/libz.so.1", 0, 0, ""),
             (X86, "libcuda.so.1", "/opt/stub/libcuda.so.1", 0, 0, "")]
    (root / "etc/ld.so.cache").write_bytes(ldcache_write.build(ldcache_write.ordered(image)))
    host = _host_driver(template, tmp_path)
    kind, _ = container_ldcache.write(str(root), (LIB, "/opt/rocm/lib"), [(str(host / "libcuda.so.550.54"),
                                      f"{LIB}/libcuda.so.550.54")], str(tmp_path / "state"))
    assert kind == container_ldcache.WRITTEN
    listing = _listing(root / "etc/ld.so.cache")
    assert any(f"libcuda.so.1 (libc6,x86-64) => {LIB}/libcuda.so.550.54" in line for line in listing)
    assert any("libz.so.1" in line for line in listing) and not any("/opt/stub" in line for line in listing)
    assert os.readlink(root / LIB.lstrip("/") / "libcuda.so.1") == "libcuda.so.550.54"  # ldconfig's SONAME link
    assert (root / "etc/ld.so.conf.d/000-gpuhook.conf").read_text() == "/opt/rocm/lib\n"  # LIB is listed already
    assert [p.name for p in (root / "etc").iterdir() if "gpuhook-" in p.name] == []  # no temporary file left


def test_an_image_without_glibc_gets_nothing(tmp_path: Path) -> None:
    root = tmp_path / "musl"
    (root / "etc").mkdir(parents=True)
    kind, _ = container_ldcache.write(str(root), (LIB,), [], str(tmp_path / "state"))
    assert kind == container_ldcache.NOTHING and not (root / "etc/ld.so.cache").exists()


def _symlink_out(root: Path, outside: Path) -> None:
    (root / "etc/ld.so.cache").symlink_to(outside)


def _fifo(root: Path, _: Path) -> None:
    os.mkfifo(root / "etc/ld.so.cache")


def _directory(root: Path, _: Path) -> None:
    (root / "etc/ld.so.cache").mkdir()


def _huge(root: Path, _: Path) -> None:
    with open(root / "etc/ld.so.cache", "wb") as f:
        f.truncate(ldcache_write.MAX_SIZE + 1)


def _truncated(root: Path, _: Path) -> None:
    (root / "etc/ld.so.cache").write_bytes(_valid()[:100])


def _offsets(root: Path, _: Path) -> None:
    (root / "etc/ld.so.cache").write_bytes(HOSTILE["key-beyond-the-file"])


KINDS = {"symlink-out-of-the-root": _symlink_out, "fifo": _fifo, "directory": _directory, "huge": _huge,
         "truncated": _truncated, "offsets-out-of-range": _offsets}


@pytest.mark.parametrize("make", KINDS.values(), ids=KINDS.keys())
def test_a_hostile_image_cache_is_ignored_never_followed(template: bytes, tmp_path: Path, make: object) -> None:
    root = _glibc_root(tmp_path)
    outside = tmp_path / "outside-cache"
    outside.write_bytes(_valid())
    before = outside.read_bytes()
    make(root, outside)  # type: ignore[operator]
    host = _host_driver(template, tmp_path)
    result: list[tuple[str, str]] = []
    worker = threading.Thread(target=lambda: result.append(container_ldcache.write(
        str(root), (LIB,), [(str(host / "libcuda.so.550.54"), f"{LIB}/libcuda.so.550.54")], str(tmp_path / "s"),
        openat2=False)), daemon=True)
    worker.start()
    worker.join(10)
    assert result, "the write hung"
    assert result[0][0] == container_ldcache.FALLBACK and "ignored" in result[0][1]
    assert outside.read_bytes() == before


def test_an_etc_that_links_out_of_the_root_is_resolved_inside_it(template: bytes, tmp_path: Path) -> None:
    root = _glibc_root(tmp_path)
    outside = tmp_path / "outside-etc"
    outside.mkdir()
    shutil.rmtree(root / "etc")
    (root / "etc").symlink_to(outside)  # absolute: inside the root it means <root>/<outside>
    (root / str(outside).lstrip("/")).mkdir(parents=True)
    host = _host_driver(template, tmp_path)
    kind, _ = container_ldcache.write(str(root), (LIB,), [(str(host / "libcuda.so.550.54"),
                                                           f"{LIB}/libcuda.so.550.54")], str(tmp_path / "s"))
    assert kind == container_ldcache.WRITTEN
    assert list(outside.iterdir()) == []
    assert (root / str(outside).lstrip("/") / "ld.so.cache").is_file()


def test_the_conf_file_only_where_the_images_ldconfig_reads_it(template: bytes, tmp_path: Path) -> None:
    """An include loop is read once (one level: ld.so.conf and ld.so.conf.d), a FIFO never; an ld.so.conf that
    includes no ld.so.conf.d gets no file there."""
    root = _glibc_root(tmp_path)
    (root / "etc/ld.so.conf.d/loop.conf").write_text("include /etc/ld.so.conf\ninclude /etc/ld.so.conf.d/*.conf\n")
    os.mkfifo(root / "etc/ld.so.conf.d/fifo.conf")
    host = _host_driver(template, tmp_path)
    mounts = [(str(host / "libcuda.so.550.54"), "/opt/nv/libcuda.so.550.54")]
    assert container_ldcache.write(str(root), ("/opt/nv",), mounts, str(tmp_path / "s"))[0] == container_ldcache.WRITTEN
    assert (root / "etc/ld.so.conf.d/000-gpuhook.conf").read_text() == "/opt/nv\n"
    (root / "etc/ld.so.conf").write_text("/usr/local/lib\n")
    (root / "etc/ld.so.conf.d/000-gpuhook.conf").unlink()
    assert container_ldcache.write(str(root), ("/opt/nv",), mounts, str(tmp_path / "s"))[0] == container_ldcache.WRITTEN
    assert not (root / "etc/ld.so.conf.d/000-gpuhook.conf").exists()
