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
    from collections.abc import Callable
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
        # setting -> (get, set)
        self._pairs: dict[str, tuple[Callable[[Setting], str], Callable[[Setting, str], None]]] = {
            "clocks": (self._unlocked, self._set_clocks),
            "power_limit": (lambda s: str(self._nvml.power_limit(self._handle(s))), self._set_power_limit),
            "fan": (self._fans_now, self._set_fans),
            "compute_mode": (self._compute_mode, self._set_compute_mode),
            "mps": (lambda s: "off", self._mps),
        }
        # setting -> the check of a value asked against the GPU's own range (or what it has: fans, MPS's program)
        self._checks: dict[str, Callable[[Setting, str], None]] = {
            "clocks": self._check_clocks, "power_limit": self._check_power_limit, "fan": self._check_fans,
            "compute_mode": lambda s, v: None, "mps": self._check_mps,
        }

    def close(self) -> None:
        """End the NVML session."""
        self._session.__exit__(None, None, None)

    def get(self, s: Setting) -> str:
        """The current value (locked clocks cannot be read back: their original is 'unlocked'; MPS is 'off': a
        daemon gpuhook did not start is not gpuhook's to stop)."""
        getter, _ = self._pair(s)
        try:
            return getter(s)
        except self._error as e:
            raise TuningError(f"NVML cannot read {s.name} of GPU {s.index} ({s.gpu}): {e}") from e

    def set(self, s: Setting, value: str) -> None:
        """Apply a value on the host GPU (the caller checked a value asked first: tuning/backends.BackendSet.check,
        the last guard)."""
        _, setter = self._pair(s)
        try:
            setter(s, value)
        except self._error as e:
            raise TuningError(f"NVML cannot set {s.name}={value} on GPU {s.index} ({s.gpu}): {e}") from e

    def check(self, s: Setting) -> None:
        """TuningError where the GPU cannot take `s.value`: outside its supported graphics clocks, its power-limit
        constraints or its fan speeds, a GPU without a fan, a host without MPS's control program; NVML's own failure
        to say. Reads the GPU; writes nothing."""
        self._pair(s)
        try:
            self._handle(s)  # a GPU NVML does not know is refused by name
            self._checks[s.name](s, s.value)
        except self._error as e:
            raise TuningError(f"NVML cannot tell what {s.name} GPU {s.index} ({s.gpu}) takes: {e}") from e

    def _pair(self, s: Setting) -> tuple[Callable[[Setting], str], Callable[[Setting, str], None]]:
        """The (get, set) pair of a setting."""
        if s.name not in self._pairs:
            raise TuningError(f"NVML has no setting {s.name} (GPU {s.index}, {s.gpu})")
        return self._pairs[s.name]

    def _unlocked(self, s: Setting) -> str:
        self._handle(s)  # a GPU NVML does not know is refused by name
        return "unlocked"

    def _set_clocks(self, s: Setting, value: str) -> None:
        h = self._handle(s)
        if value == "unlocked":
            self._nvml.reset_clocks(h)
            return
        lo, hi = (int(x) for x in value.split("-"))
        self._nvml.lock_clocks(h, lo, hi)

    def _check_clocks(self, s: Setting, value: str) -> None:
        """A locked range within the GPU's supported graphics clocks: NVML would clamp it, or take 32 bits."""
        if value == "unlocked":
            return
        lo, hi = (int(x) for x in value.split("-"))
        least, most = self._graphics_clocks(self._handle(s))
        if not least <= lo <= hi <= most:
            raise TuningError(f"GPU {s.index} ({s.gpu}) locks its graphics clock within {least}-{most} MHz: "
                              f"{_mhz(lo, hi)} refused")

    def _set_power_limit(self, s: Setting, value: str) -> None:
        self._nvml.set_power_limit(self._handle(s), int(value))

    def _check_power_limit(self, s: Setting, value: str) -> None:
        """Milliwatts within the board's power-limit constraints: NVML takes 32 bits, nothing outside is sent."""
        lo, hi = self._nvml.power_limit_range(self._handle(s))
        if not lo <= int(value) <= hi:
            raise TuningError(f"GPU {s.index} ({s.gpu}) takes a power limit of {lo // 1000}-{hi // 1000} W: "
                              f"{int(value) // 1000} W refused")

    def _compute_mode(self, s: Setting) -> str:
        mode = self._nvml.compute_mode(self._handle(s))
        return next((k for k, v in _MODES.items() if v == mode), str(mode))

    def _set_compute_mode(self, s: Setting, value: str) -> None:
        self._nvml.set_compute_mode(self._handle(s), _MODES[value] if value in _MODES else int(value))

    def _mps(self, s: Setting, value: str) -> None:
        """Start the GPU's MPS control daemon in directory `value`, or ('off') make the one in s.value quit."""
        from gpuhook.vendors.nvidia import mps

        self._check_mps(s, value)
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

    def _fans_now(self, s: Setting) -> str:
        """'auto' when every fan follows the driver's curve (also where the driver cannot say: its default), else
        each fan's policy or target speed."""
        from gpuhook.host.nvml_lib import FAN_POLICY_AUTO

        h = self._handle(s)
        each = []
        for fan in range(self._count_fans(s, h)):
            try:
                manual = self._nvml.fan_policy(h, fan) != FAN_POLICY_AUTO
            except self._error:
                manual = False
            each.append(str(self._nvml.fan_target(h, fan)) if manual else "auto")
        return "auto" if set(each) == {"auto"} else "fans " + ",".join(each)

    def _set_fans(self, s: Setting, value: str) -> None:
        h = self._handle(s)
        count = self._count_fans(s, h)
        # an original, fan by fan, or one speed (or auto) for every fan
        each = value.removeprefix("fans ").split(",") if value.startswith("fans ") else [value] * count
        for fan, speed in enumerate(each[:count]):
            if speed == "auto":
                self._nvml.auto_fan(h, fan)
            else:
                self._nvml.set_fan(h, fan, int(speed))

    def _check_mps(self, s: Setting, value: str) -> None:
        """The host's control program to run the daemon with, and state_dir to record it in."""
        if not self._mps_control:
            raise TuningError(f"GPU {s.index} ({s.gpu}): the host has no nvidia-cuda-mps-control (the driver's "
                              "compute utilities) to run MPS with")
        if not self._state_dir:
            raise TuningError(f"GPU {s.index} ({s.gpu}): MPS daemons are recorded in state_dir, and this backend "
                              "was given none")

    def _check_fans(self, s: Setting, value: str) -> None:
        """A board with fans, and a fixed speed within NVML's minimum and maximum fan speed."""
        h = self._handle(s)
        self._count_fans(s, h)
        if value != "auto" and not value.startswith("fans "):
            least, most = self._nvml.fan_range(h)
            if not least <= int(value) <= most:
                raise TuningError(f"GPU {s.index} ({s.gpu}) runs its fans at {least}-{most}%: {value}% refused")

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
