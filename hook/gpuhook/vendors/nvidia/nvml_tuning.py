"""NVIDIA tuning through NVML (the host root's libnvidia-ml, called through host/nvml_lib.py: no pynvml in the
hooks): locked clocks, power limit, fans, compute mode. Values are text: clocks 'MIN-MAX' or 'unlocked', power in
milliwatts, fans 'auto', a percent for every fan, or (an original) 'fans auto,55' fan by fan; compute mode by name;
mps the MPS control daemon's directory (its pipe/ and log/), or 'off': the host's nvidia-cuda-mps-control is started
for the GPU, and told to quit."""

from __future__ import annotations

from gpuhook.errors import TuningError
from gpuhook.vendors.contract import Setting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ctypes import c_void_p

    from gpuhook.host.nvml_lib import Nvml

_MODES = {"default": 0, "prohibited": 2, "exclusive-process": 3}


def _mhz(lo: int, hi: int) -> str:
    return f"{lo} MHz" if lo == hi else f"{lo}-{hi} MHz"


class NvmlBackend:
    """Reads and writes NVIDIA GPU settings; holds one NVML session until close()."""

    def __init__(self, library: str, mps_control: str = "", state_dir: str = "") -> None:
        from gpuhook.host import nvml_lib

        self._mps_control = mps_control
        self._state_dir = state_dir  # where the MPS daemons gpuhook started are recorded
        self._error = nvml_lib.NvmlError
        self._session = nvml_lib.session(library)
        self._nvml: Nvml = self._session.__enter__()

    def close(self) -> None:
        """End the NVML session."""
        self._session.__exit__(None, None, None)

    def get(self, s: Setting) -> str:
        """The current value (locked clocks cannot be read back: their original is 'unlocked'; MPS is 'off': a
        daemon gpuhook did not start is not gpuhook's to stop)."""
        if s.name == "mps":
            return "off"
        h = self._handle(s)
        try:
            if s.name == "clocks":
                return "unlocked"
            if s.name == "power_limit":
                return str(self._nvml.power_limit(h))
            if s.name == "fan":
                return self._fans_now(s, h)
            mode = self._nvml.compute_mode(h)
            return next((k for k, v in _MODES.items() if v == mode), str(mode))
        except self._error as e:
            raise TuningError(f"NVML cannot read {s.name} of GPU {s.index} ({s.gpu}): {e}") from e

    def set(self, s: Setting, value: str) -> None:
        """Apply a value on the host GPU."""
        if s.name == "mps":
            self._mps(s, value)
            return
        h = self._handle(s)
        try:
            if s.name == "clocks" and value == "unlocked":
                self._nvml.reset_clocks(h)
            elif s.name == "clocks":
                lo, hi = (int(x) for x in value.split("-"))
                least, most = self._graphics_clocks(h)
                if not least <= lo <= hi <= most:  # NVML would clamp or take 32 bits: refuse with the range
                    raise TuningError(f"GPU {s.index} ({s.gpu}) locks its graphics clock within {least}-{most} MHz: "
                                      f"{_mhz(lo, hi)} refused")
                self._nvml.lock_clocks(h, lo, hi)
            elif s.name == "power_limit":
                lo, hi = self._nvml.power_limit_range(h)
                if not lo <= int(value) <= hi:  # NVML takes 32 bits: nothing outside the board's range is sent
                    raise TuningError(f"GPU {s.index} ({s.gpu}) takes a power limit of {lo // 1000}-{hi // 1000} W: "
                                      f"{int(value) // 1000} W refused")
                self._nvml.set_power_limit(h, int(value))
            elif s.name == "fan":
                self._set_fans(s, h, value)
            else:
                self._nvml.set_compute_mode(h, _MODES[value] if value in _MODES else int(value))
        except self._error as e:
            raise TuningError(f"NVML cannot set {s.name}={value} on GPU {s.index} ({s.gpu}): {e}") from e

    def _mps(self, s: Setting, value: str) -> None:
        """Start the GPU's MPS control daemon in directory `value`, or ('off') make the one in s.value quit."""
        from gpuhook.vendors.nvidia import mps

        if not self._mps_control:
            raise TuningError(f"GPU {s.index} ({s.gpu}): the host has no nvidia-cuda-mps-control (the driver's "
                              "compute utilities) to run MPS with")
        if not self._state_dir:
            raise TuningError(f"GPU {s.index} ({s.gpu}): MPS daemons are recorded in state_dir, and this backend "
                              "was given none")
        if value == "off":
            mps.stop(self._mps_control, s.device, s.value, self._state_dir)
        else:
            mps.start(self._mps_control, s.device, value, self._state_dir)

    def _count_fans(self, s: Setting, h: c_void_p) -> int:
        try:
            count = self._nvml.fans(h)
        except self._error as e:
            raise TuningError(f"GPU {s.index} ({s.gpu}) has no fan NVML can control ({e}): remove gpuhook.dev/fan "
                              "(a passively cooled board is cooled by its chassis)") from e
        if not count:
            raise TuningError(f"GPU {s.index} ({s.gpu}) has no fan (a passively cooled board is cooled by its "
                              "chassis): remove gpuhook.dev/fan")
        return count

    def _fans_now(self, s: Setting, h: c_void_p) -> str:
        """'auto' when every fan follows the driver's curve (also where the driver cannot say: its default), else
        each fan's policy or target speed."""
        from gpuhook.host.nvml_lib import FAN_POLICY_AUTO

        each = []
        for fan in range(self._count_fans(s, h)):
            try:
                manual = self._nvml.fan_policy(h, fan) != FAN_POLICY_AUTO
            except self._error:
                manual = False
            each.append(str(self._nvml.fan_target(h, fan)) if manual else "auto")
        return "auto" if set(each) == {"auto"} else "fans " + ",".join(each)

    def _set_fans(self, s: Setting, h: c_void_p, value: str) -> None:
        count = self._count_fans(s, h)
        if value.startswith("fans "):  # an original, fan by fan
            each = value.removeprefix("fans ").split(",")
        else:
            each = [value] * count
            if value != "auto":
                least, most = self._nvml.fan_range(h)
                if not least <= int(value) <= most:
                    raise TuningError(f"GPU {s.index} ({s.gpu}) runs its fans at {least}-{most}%: {value}% refused")
        for fan, speed in enumerate(each[:count]):
            if speed == "auto":
                self._nvml.auto_fan(h, fan)
            else:
                self._nvml.set_fan(h, fan, int(speed))

    def _graphics_clocks(self, h: c_void_p) -> tuple[int, int]:
        """The lowest and highest graphics clock the GPU supports (at its highest memory clock), MHz; from the
        maximum clock alone where the supported lists are not given."""
        from gpuhook.host.nvml_lib import CLOCK_GRAPHICS

        try:
            memory = max(self._nvml.memory_clocks(h) or [0])
            supported = self._nvml.graphics_clocks(h, memory) if memory else []
        except self._error:
            supported = []
        if supported:
            return min(supported), max(supported)
        return 1, self._nvml.max_clock(h, CLOCK_GRAPHICS)

    def _handle(self, s: Setting) -> c_void_p:
        try:
            return self._nvml.handle(s.device)
        except self._error as e:
            raise TuningError(f"NVML does not know GPU {s.gpu}: {e}") from e
