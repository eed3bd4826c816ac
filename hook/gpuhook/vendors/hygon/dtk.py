"""Hygon's DTK (DCU Toolkit: HIP, libraries and compilers on Hygon's fork of ROCm) in an image, against the host's
Hygon DCU kernel driver (hydcu up to 6.2.x, hycu from 6.3).

Facts (restated; Hygon's own matrix sits behind a login, so these are as third parties quote it, and the table errs
towards fewer releases): the driver of rock-5.2.0-5.16.x runs DTK 22.10 to 23.10; rock-5.7.1-6.2.26 and later 6.2
drivers run DTK 24.04 to 25.04; 6.3.8 and later (BW1000) run DTK 25.04. Hygon's images bundle their DTK under
/opt/dtk-<version>, with /opt/dtk linking to it and .info/version in it; the image tags say it too (dtk24.04.2),
but a runtime sees no tag. Pure, but for image_version, which reads the image root (never out of it).
"""

from __future__ import annotations

from gpuhook.errors import UnsafePathError
from gpuhook.request.requirements import is_version, version_tuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.image import InRoot

# driver series (major.minor) -> (oldest, newest) DTK release it runs
WINDOWS: dict[str, tuple[str, str]] = {"5.16": ("22.10", "23.10"), "6.2": ("24.04", "25.04"), "6.3": ("25.04", "25.04")}


def window(driver: str) -> tuple[str, str] | None:
    """(oldest, newest) DTK the driver of version `driver` runs; None when the table does not know its series."""
    return WINDOWS.get(".".join(driver.split(".")[:2]))


def version_in(name: str) -> str | None:
    """The DTK release a name or file gives: 'dtk-24.04.2' and '24.04.2-rc1' -> 24.04.2; None for none."""
    text = name.strip().removeprefix("dtk-").removeprefix("dtk")
    head = ""
    for ch in text:
        if not (ch.isascii() and (ch.isdigit() or ch == ".")):
            break
        head += ch
    head = head.strip(".")
    return head if head.count(".") >= 1 and is_version(head) else None


def image_version(image: InRoot, notes: list[str] | None = None) -> str | None:
    """The DTK an image ships: /opt/dtk/.info/version, else the newest /opt/dtk-<version> directory. Reads inside
    the image root only; a file gpuhook refuses to read (a FIFO, a device, too large) is said in `notes`."""
    try:
        found = version_in(image.read_text("/opt/dtk/.info/version", 256))
        if found:
            return found
    except UnsafePathError as e:
        if notes is not None:
            notes.append(f"{e}: its DTK version was not read")
    except OSError:
        pass
    names = [version_in(d) for d in image.listdir("/opt") if d.startswith("dtk-")]
    versions = [v for v in names if v]
    return max(versions, key=version_tuple) if versions else None

