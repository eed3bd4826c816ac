"""The device filter a container's runtime would itself build: runc's (apply/device_filter.py, the cgroup v1
emulation) or crun's (apply/device_filter_crun.py), each with the runtime's own semantics."""

from __future__ import annotations

from gpuhook.apply import device_filter_crun
from gpuhook.apply.device_filter import compile_rules, container_rules, encode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Literal

    from gpuhook.edits import DeviceRule


def compile_for(spec: dict[str, Any], runtime: str, added: Sequence[DeviceRule],
                byteorder: Literal["little", "big"] = "little") -> bytes:
    """The filter `runtime` itself would have built for the container of `spec` with `added` after its rules:
    runc's (the cgroup v1 emulation) or crun's (apply/device_filter_crun.py). Ready for BPF_PROG_LOAD."""
    if runtime == "crun":
        return encode(device_filter_crun.instructions(spec, added), byteorder)
    return compile_rules(container_rules(spec, runtime, added), byteorder)
