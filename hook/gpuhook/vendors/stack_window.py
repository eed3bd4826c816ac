"""The check most vendors' user space takes (Hygon's DTK): the container's release against the window of releases the
host's driver runs, which the vendor's stack part gives. Pure."""

from __future__ import annotations

from gpuhook.errors import PolicyError
from gpuhook.request.requirements import in_window

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import VendorInventory

STRICT = ' (refused by [policy] rocm_compatibility = "strict")'


def check(label: str, stack: str, inv: VendorInventory, release: str, span: tuple[str, str] | None,
          strict: bool) -> str | None:
    """A warning when `release` of `stack` is outside `span` (the host's `label` driver's window) or no window is
    known; None inside it; PolicyError outside it when `strict`."""
    if span is None:
        return (f"the image ships {stack} {release}, but gpuhook does not know which {stack} releases the host's "
                f"{label} driver {inv.driver_version or '(no version)'} runs: not checked")
    if in_window(release, span):
        return None
    lo, hi = span
    msg = (f"the image ships {stack} {release} but the host's {label} driver {inv.driver_version} runs {stack} {lo} "
           f"to {hi}: use an image with {stack} {lo}-{hi} or a host driver that runs {release}")
    if strict:
        raise PolicyError(msg + STRICT)
    return msg
