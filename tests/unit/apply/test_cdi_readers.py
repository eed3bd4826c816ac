"""Which cdiVersions each engine release parses: the container-device-interface its go.mod requires."""

from __future__ import annotations

import pytest

from gpuhook.apply.cdi_readers import Reader, common_highest, library_in, version_in
from gpuhook.engines.table import reader

VERSIONS = [
    ("podman version 4.3.1", "4.3.1"),
    ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", "1.6.20"),
    ("containerd containerd.io 1.7.13 7c3aca7a610df76212171d200ca3811ff6096eb8", "1.7.13"),
    ("containerd github.com/containerd/containerd/v2 v2.0.2 c507a0257ea6462fbd6f5ba4f5c74facb04021f4", "2.0.2"),
    ("Docker version 20.10.24+dfsg1, build 5d6db84", "20.10.24"),
    ("crio version 1.28.1\nVersion:        1.28.1\nGitCommit: 1a7a2f8", "1.28.1"),
    ("no version here", None),
]


@pytest.mark.parametrize(("output", "version"), VERSIONS, ids=[f"{v[0].split()[0]}{i}" for i, v in enumerate(VERSIONS)])
def test_version_outputs(output: str, version: str | None) -> None:
    assert version_in(output) == version


RELEASES = [  # (engine, release, its CDI library, the highest cdiVersion it parses)
    ("podman", "3.4.4", "", ""), ("podman", "4.0.2", "0.2.0", "0.2.0"), ("podman", "4.2.0", "0.4.0", "0.4.0"),
    ("podman", "4.3.1", "0.5.2", "0.5.0"), ("podman", "4.9.3", "0.6.2", "0.6.0"),
    ("podman", "5.0.3", "0.6.2", "0.6.0"), ("podman", "5.1.0", "0.7.2", "0.7.0"),
    ("podman", "5.4.2", "0.8.0", "0.8.0"), ("podman", "5.8.1", "1.0.1", "1.0.0"),
    ("containerd", "1.6.20", "", ""), ("containerd", "1.7.2", "0.5.4", "0.5.0"),
    ("containerd", "1.7.13", "0.6.2", "0.6.0"), ("containerd", "1.7.24", "0.7.2", "0.7.0"),
    ("containerd", "2.0.2", "0.8.0", "0.8.0"), ("containerd", "2.2.3", "1.1.0", "1.1.0"),
    ("docker", "20.10.24", "", ""), ("docker", "25.0.3", "0.6.2", "0.6.0"), ("docker", "25.0.17", "0.8.1", "0.8.0"),
    ("docker", "26.0.2", "0.6.2", "0.6.0"), ("docker", "26.1.4", "0.7.2", "0.7.0"),
    ("docker", "28.2.2", "1.0.1", "1.0.0"),
    ("crio", "1.24.6", "0.3.2", "0.3.0"), ("crio", "1.28.1", "0.6.0", "0.6.0"), ("crio", "1.36.0", "1.1.0", "1.1.0"),
]


@pytest.mark.parametrize(("engine", "release", "library", "highest"), RELEASES,
                         ids=[f"{r[0]}-{r[1]}" for r in RELEASES])
def test_releases(engine: str, release: str, library: str, highest: str) -> None:
    found = reader(engine, release)
    assert (found.library, found.highest) == (library, highest)


def test_the_lowest_reader_limits_and_non_readers_do_not() -> None:
    readers = (reader("podman", "4.3.1"), reader("containerd", "1.6.20"), reader("docker", "26.1.4"))
    assert common_highest(readers) == ("0.5.0", Reader("podman", "4.3.1", "0.5.2", "Podman"))
    assert common_highest((reader("docker", "20.10.24"),)) is None and common_highest(()) is None
    assert readers[0].label == "Podman 4.3.1"
    with pytest.raises(ValueError, match="unknown CDI consumer"):
        reader("lxd", "5.0")


def test_a_release_table_reads_from_its_first_row_on() -> None:
    rows = (("1.0.0", "0.5.0"), ("1.2.0", "0.6.0"))
    assert [library_in(rows, v) for v in ("0.9", "1.0.0", "1.1.9", "1.2.0", "9.0")] == ["", "0.5.0", "0.5.0",
                                                                                        "0.6.0", "0.6.0"]
    assert Reader("toy", "1.0", "0.5.0").label == "toy 1.0"  # no product: the engine's name
