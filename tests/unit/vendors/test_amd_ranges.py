"""vendors/amd/ranges.py: the refusals that name an amdgpu GPU's own range, from literals."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuhook.errors import TuningError
from gpuhook.vendors.amd import ranges
from gpuhook.vendors.contract import Setting


def _s(name: str, value: str) -> Setting:
    return Setting(vendor="amd", gpu="0x1", index=3, pci="0000:80:00.0", device="/sys/x", name=name, value=value)


LEVELS = (500, 1200, 1700, 2100)

CASES: list[tuple[str, Callable[[], None], str]] = [
    ("clocks inside", lambda: ranges.clocks(_s("sclk", "500-2100"), 500, 2100, LEVELS), ""),
    ("clocks one level", lambda: ranges.clocks(_s("sclk", "1200-1200"), 500, 2100, LEVELS), ""),
    ("clocks above", lambda: ranges.clocks(_s("sclk", "5000-5000"), 500, 2100),
     "GPU 3 (0000:80:00.0) runs its graphics clock within 500-2100 MHz: 5000 MHz refused"),
    ("clocks below", lambda: ranges.clocks(_s("sclk", "100-1500"), 500, 2100), "500-2100 MHz: 100-1500 MHz refused"),
    ("clocks between levels", lambda: ranges.clocks(_s("sclk", "1300-1600"), 500, 2100, LEVELS),
     "has sclk levels 500, 1200, 1700, 2100 MHz: none within 1300-1600 MHz"),
    ("power inside", lambda: ranges.power_cap(_s("power_cap", "750000000"), 100_000_000, 750_000_000, "x"), ""),
    ("power above", lambda: ranges.power_cap(_s("power_cap", "5000000000"), 100_000_000, 750_000_000, "amd-smi"),
     "takes a power cap of 100-750 W (amd-smi): 5000 W refused"),
    ("power below", lambda: ranges.power_cap(_s("power_cap", "50000000"), 100_000_000, 750_000_000, "x"),
     "100-750 W (x): 50 W refused"),
    ("power no minimum", lambda: ranges.power_cap(_s("power_cap", "900000000"), 0, 750_000_000, "power1_cap_max"),
     "takes a power cap of at most 750 W (power1_cap_max): 900 W refused"),
    ("power no range", lambda: ranges.power_cap(_s("power_cap", "900000000"), 0, 0, "x"), ""),
    ("fan inside", lambda: ranges.fan(_s("fan", "20"), 51, 255), ""),
    ("fan below", lambda: ranges.fan(_s("fan", "10"), 51, 255),
     "runs its fan at 20-100% (pwm1_min/pwm1_max 51-255): 10% refused"),
    ("fan auto", lambda: ranges.fan(_s("fan", "auto"), 51, 255), ""),
    ("fan an original", lambda: ranges.fan(_s("fan", "manual 12"), 51, 255), ""),
]


@pytest.mark.parametrize(("check", "said"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_value_outside_the_gpus_range_is_refused_naming_it(check: Callable[[], None], said: str) -> None:
    if not said:
        check()
        return
    with pytest.raises(TuningError) as info:
        check()
    assert said in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("text", "expected"), [("750000000", 750000000), ("", 0), ("\u0663", 0), ("1" * 21, 0),
                                                ("-5", 0)], ids=["digits", "absent", "arabic-indic", "long", "minus"])
def test_a_files_number_is_ascii_digits_or_absent(text: str, expected: int) -> None:
    assert ranges.number(text, 0) == expected
