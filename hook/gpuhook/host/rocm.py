"""ROCm user space in the image vs the host's amdgpu kernel driver.

Sources (facts, restated):
- AMD, "User and kernel-space support matrix" (ROCm install-on-linux docs, reference/
  user-kernel-space-compat-matrix): the kernel-mode driver (KMD) of a ROCm release supports user space
  within +/- 2 releases up to ROCm 6.3; from 6.4 on, releases up to a year apart. The tested windows:
  5.3: 5.1-5.5, 5.4: 5.2-5.6, 5.5: 5.3-5.7, 5.6: 5.4-6.0, 5.7: 5.5-6.1, 6.0: 5.6-6.2, 6.1: 5.7-6.4,
  6.2: 6.0-6.4, 6.3: 6.1-6.4, 6.4: 6.1-6.4; AMD GPU driver 30.30 (ROCm 7.2): 6.3-7.2.
- The DKMS module reports its own version in /sys/module/amdgpu/version, not the ROCm release: the
  amdgpu-dkms of ROCm 6.0 is 6.3.x, 6.1: 6.7.x, 6.2: 6.8.x, 6.3: 6.10.x, 6.4: 6.12.x, 7.0: 6.14.x,
  7.1: 6.16.6, 7.2: 6.16.13.
"""

from __future__ import annotations

from gpuhook.request.requirements import in_window, version_tuple

# KMD ROCm release -> (oldest, newest) user space release it supports
MATRIX: dict[str, tuple[str, str]] = {
    "5.3": ("5.1", "5.5"), "5.4": ("5.2", "5.6"), "5.5": ("5.3", "5.7"), "5.6": ("5.4", "6.0"),
    "5.7": ("5.5", "6.1"), "6.0": ("5.6", "6.2"), "6.1": ("5.7", "6.4"), "6.2": ("6.0", "6.4"),
    "6.3": ("6.1", "6.4"), "6.4": ("6.1", "6.4"), "7.0": ("6.3", "7.0"), "7.1": ("6.3", "7.1"),
    "7.2": ("6.3", "7.2"),
}
# amdgpu-dkms version (first version of a series) -> the ROCm release that ships it
DKMS: tuple[tuple[str, str], ...] = (
    ("6.3.0", "6.0"), ("6.7.0", "6.1"), ("6.8.0", "6.2"), ("6.10.0", "6.3"), ("6.12.0", "6.4"),
    ("6.14.0", "7.0"), ("6.16.0", "7.1"), ("6.16.13", "7.2"),
)


def release_of_driver(dkms: str) -> str | None:
    """The ROCm release whose amdgpu-dkms this is (by major.minor series), or None when unknown."""
    have = version_tuple(dkms)
    found = None
    for first, release in DKMS:
        start = version_tuple(first)
        if start[:2] == have[:2] and start <= have:
            found = release
    return found


def window(release: str) -> tuple[str, str] | None:
    """(oldest, newest) ROCm user space the KMD of `release` supports, or None when not in the matrix."""
    return MATRIX.get(".".join(release.split(".")[:2]))


def supported(user: str, release: str) -> bool | None:
    """Whether ROCm user space `user` runs on the KMD of `release`; None when the matrix does not say."""
    span = window(release)
    return None if span is None else in_window(user, span)
