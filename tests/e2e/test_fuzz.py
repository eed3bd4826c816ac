"""Request fuzzing through the real `gpuhook-runtime create` (the runtime is a recorder) and through
`gpuhook hook` with hostile stdin: zero internal errors, zero tracebacks, zero hangs, config.json byte-identical
whenever the runtime was not called, and never a half-edited spec handed to it. Seeded: a failure names its
case, and the same seed replays it."""

from __future__ import annotations

import json
import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.bundle import oci_config

from . import conftest

CASES = 2000
SEED = 20261201
A = "gpuhook.dev/"
KEYS = ["gpus", "vendor", "capabilities", "require", "host-rocm", "clocks", "power-limit", "perf-level",
        "compute-mode", "exclusive", "fine-grain-pcie", "gfx-override", "unknown-key"]
VALUES = ["0", "1", "all", "none", "void", "", "0-1", "0-99999999999", "9" * 5000, "\u0663", "-1", "nan", "inf",
          "GPU-00000000-5a1e-4000-8000-0000d00d0000", "GPU-zz", "0x5a1e000000000000", "0x", "0000:10:00.0",
          "10:00.0", "nvidia", "amd", "toy", "compute,utility", "all,video", "cuda>=12.4", "cuda>=12.\u0664",
          "driver>=535 brand=tesla", "rocm>=6.2", "true", "false", "6.2", "6.2,override", "1500", "1200-1800MHz",
          "300W", "1e3", "profile_peak", "exclusive-process", "10.3.0", "10.3.x", ",,,", "0," * 3000,
          "\x00", "\n", '"', "\\", "0-1023," * 600]
ENV_KEYS = ["NVIDIA_VISIBLE_DEVICES", "AMD_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA",
            "NVIDIA_REQUIRE_ARCH", "CUDA_VERSION", "NVIDIA_DISABLE_REQUIRE", "CUDA_VISIBLE_DEVICES"]
JUNK: list[Any] = [None, 0, -1, 1.5, True, "x", [], {}, [None], [1, "a"], {"a": None}, [[[]]], "\u0663"]
FIELDS = ["annotations", "process", "process.env", "process.user", "process.user.uid",
          "process.user.additionalGids", "root", "root.path", "mounts", "linux", "linux.devices",
          "linux.resources", "linux.resources.devices", "linux.maskedPaths", "hooks", "hooks.prestart",
          "hooks.createContainer"]


def _case(rng: random.Random) -> dict[str, Any]:
    env = {k: rng.choice(VALUES) for k in rng.sample(ENV_KEYS, rng.randint(0, 3))}
    annotations = {A + k: rng.choice(VALUES) for k in rng.sample(KEYS, rng.randint(0, 4))}
    spec = oci_config(["true"], env=env, annotations=annotations)
    for _ in range(rng.choice([0, 0, 1, 2])):  # now and then a field of the wrong type, or null
        *parents, last = rng.choice(FIELDS).split(".")
        node: Any = spec
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node[last] = rng.choice(JUNK)
    if rng.random() < 0.05:
        spec = rng.choice(JUNK)  # not even an object
    return {"spec": spec}


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runtime that only records that it was called and what config.json it was handed."""
    d = tmp_path_factory.mktemp("recorder")
    script = d / "record-runtime"
    script.write_text('#!/bin/sh\nb=.\nwhile [ $# -gt 0 ]; do [ "$1" = --bundle ] && b=$2; shift; done\n'
                      'cp "$b/config.json" "$b/handed.json"\n')
    script.chmod(0o755)
    return script


def _run_one(index: int, case: dict[str, Any], work: Path, config: Path) -> str | None:
    bundle = work / f"b{index}"
    (bundle / "rootfs" / "dev").mkdir(parents=True)
    raw = json.dumps(case["spec"]).encode()
    (bundle / "config.json").write_bytes(raw)
    try:
        done = subprocess.run([conftest.SHIM, "create", "--bundle", str(bundle), f"fuzz{index}"],
                              env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)},
                              capture_output=True, text=True, timeout=5, check=False)
    except subprocess.TimeoutExpired:
        return f"case {index}: hung over 5 s"
    handed = bundle / "handed.json"
    err = done.stderr.strip().splitlines()
    if "internal error" in done.stderr or "Traceback" in done.stderr:
        return f"case {index}: {done.stderr.strip()[:300]}"
    if done.returncode == 0:
        if not handed.exists():
            return f"case {index}: exit 0 without the runtime"
        try:
            json.loads(handed.read_bytes())
        except ValueError:
            return f"case {index}: a half-written spec was handed to the runtime"
    else:
        if handed.exists():
            return f"case {index}: the runtime ran but the shim failed"
        if (bundle / "config.json").read_bytes() != raw:
            return f"case {index}: refused, but config.json changed"
        if len([e for e in err if not e.startswith("gpuhook-runtime: warning:")]) != 1:
            return f"case {index}: not one line: {done.stderr[:300]}"
    return None


def test_fuzzed_requests_through_the_runtime(mixed_host: str, recorder: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{mixed_host}"\nruntime = "{recorder}"\nstate_dir = "{tmp_path / "state"}"\n'
                      f'[policy]\nhost_rocm = false\n')
    rng = random.Random(SEED)
    cases = [_case(rng) for _ in range(CASES)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        problems = [p for p in pool.map(lambda ic: _run_one(ic[0], ic[1], tmp_path, config), enumerate(cases)) if p]
    assert problems == [], f"{len(problems)} of {CASES} failed (seed {SEED}); first: {problems[:5]}"


STATES: list[bytes] = [b"", b"null", b"[]", b"{}", b'{"pid": "1"}', b'{"bundle": 5, "pid": 1}', b"\xff\xfe",
                       b'{"bundle": "/nonexistent", "pid": 1}', b'{"id": null, "status": "stopped"}',
                       b"[" * 50_000, b'{"bundle": "' + b"a" * 100_000 + b'", "pid": -1}',
                       b'{"id": "x", "bundle": "/", "pid": 2147483648}', b'{"status": 5}']


@pytest.mark.parametrize("stage", ["prestart", "createRuntime", "poststop", "update-ldcache", None])
def test_hostile_hook_states_are_one_line_and_poststop_always_succeeds(tmp_path: Path, stage: str | None) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n')
    for state in STATES:
        done = subprocess.run([conftest.GPUHOOK, "hook", *([stage] if stage else [])], input=state,
                              capture_output=True, timeout=10, check=False,
                              env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
        err = done.stderr.decode(errors="replace")
        assert "Traceback" not in err and "internal error" not in err, (stage, state[:40], err)
        if stage == "poststop":
            assert done.returncode == 0, (state[:40], err)
        elif done.returncode != 0:
            assert len(err.strip().splitlines()) == 1, (stage, state[:40], err)
