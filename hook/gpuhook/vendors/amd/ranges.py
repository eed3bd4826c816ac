"""What an amdgpu GPU takes (AMD's, and Hygon's, which keep amdgpu's files): the refusals that name its own range, given
the range amd-smi or the sysfs files report (backends.py reads them). Pure. Settings' values are their own text
('MIN-MAX' MHz, microwatts, a fan percent), which request/knobs.py already parsed."""

from __future__ import annotations

from gpuhook.errors import TuningError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.vendors.contract import Setting


def mhz_range(value: str) -> tuple[int, int]:
    """'MIN-MAX' (or one value) MHz as two numbers."""
    lo, _, hi = value.partition("-")
    return int(lo), int(hi or lo)


def number(text: str, absent: int) -> int:
    """A file's number (ASCII digits, at most 20 of them), or `absent` where it says none: a GPU without the file."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else absent


def pwm(percent: str) -> int:
    """A fan speed in percent as amdgpu's pwm1 duty cycle, 0-255."""
    return (int(percent) * 255 + 50) // 100


def clocks(s: Setting, least: int, most: int, levels: Sequence[int] = ()) -> None:
    """TuningError where the clock range `s.value` leaves the GPU's lowest and highest sclk, or (with its sysfs
    `levels`, MHz) holds none of them: the kernel would force no level."""
    lo, hi = mhz_range(s.value)
    if not least <= lo <= hi <= most:
        asked = f"{lo} MHz" if lo == hi else f"{lo}-{hi} MHz"
        raise TuningError(f"GPU {s.index} ({s.pci}) runs its graphics clock within {least}-{most} MHz: {asked} refused")
    if levels and not any(lo <= mhz <= hi for mhz in levels):
        raise TuningError(f"GPU {s.index} ({s.pci}) has sclk levels {', '.join(str(m) for m in levels)} MHz: none "
                          f"within {lo}-{hi} MHz; ask a range holding one of them")


def power_cap(s: Setting, least: int, most: int, source: str) -> None:
    """TuningError where the power cap `s.value` (microwatts) leaves the board's [least, most] (0: not said), naming
    the range in watts and where it was read (`source`)."""
    cap = int(s.value)
    if (least and cap < least) or (most and cap > most):
        shown = f"{least // 1_000_000}-{most // 1_000_000} W" if least and most else \
            f"at least {least // 1_000_000} W" if least else f"at most {most // 1_000_000} W"
        raise TuningError(f"GPU {s.index} ({s.pci}) takes a power cap of {shown} ({source}): {cap // 1_000_000} W "
                          "refused")


def fan(s: Setting, least: int, most: int) -> None:
    """TuningError where the fixed fan speed `s.value` (percent) makes a duty cycle outside pwm1_min-pwm1_max."""
    if s.value in ("auto", "full") or s.value.startswith("manual "):
        return
    if not least <= pwm(s.value) <= most:
        low, high = (-(-least * 100 // 255), most * 100 // 255)
        raise TuningError(f"GPU {s.index} ({s.pci}) runs its fan at {low}-{high}% (pwm1_min/pwm1_max "
                          f"{least}-{most}): {s.value}% refused")
