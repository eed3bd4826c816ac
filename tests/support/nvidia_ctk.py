"""NVIDIA's container toolkit (tools/components/nvidia-ctk) pointed at a simulated host: its own CDI spec of the host,
and the config that puts its runtime in CDI mode on a spec directory. For the cluster tier and the benchmark."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

LIB_DIR = "/usr/lib/x86_64-linux-gnu"


def own_spec(ctk: str, hook: str, host: str, output: Path) -> subprocess.CompletedProcess[str]:
    """`nvidia-ctk cdi generate` of the simulated `host` into `output` (JSON), its hooks naming `hook`. nvidia-ctk
    asks NVML (the host's stub, which counts the /dev/nvidia<N> it sees) and finds the nodes under --dev-root: the
    host's /dev over this one's, in a mount namespace of its own. Runs it; the caller checks the result."""
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", f'mount --bind "{host}/dev" /dev && exec "$@"', "-",
         ctk, "cdi", "generate", "--driver-root", host, "--dev-root", host, "--format", "json",
         "--nvidia-cdi-hook-path", hook, "--output", str(output)],
        env={"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": host + LIB_DIR}, capture_output=True, text=True,
        check=False)


def cdi_mode(xdg: Path, specs: Path) -> Path:
    """`xdg` made an XDG config dir whose nvidia-container-runtime config selects CDI mode on the spec directory
    `specs`, in front of runc; `xdg` (the runtime's XDG_CONFIG_HOME). Writes a file."""
    (xdg / "nvidia-container-runtime").mkdir(parents=True)
    (xdg / "nvidia-container-runtime" / "config.toml").write_text(
        '[nvidia-container-runtime]\nmode = "cdi"\nruntimes = ["runc"]\n\n'
        f'[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["{specs}"]\ndefault-kind = "nvidia.com/gpu"\n')
    return xdg
