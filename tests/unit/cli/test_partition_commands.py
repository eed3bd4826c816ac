"""`gpuhook partition apply FILE`: a layout file is read bounded (issue 43, 7): a FIFO is refused at once, not
waited on, and JSON or TOML nested 2,000 deep is one line, never a RecursionError's traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ...conftest import FakeHost
from .test_config_commands import _one_line_refusal


@pytest.fixture
def config(fake_host: FakeHost, tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'host_root = "{fake_host(nvidia=1)}"\nstate_dir = "{tmp_path / "state"}"\n')
    return path


@pytest.mark.parametrize("dry", [[], ["--dry-run"]], ids=["apply", "dry-run"])
def test_a_fifo_is_refused_at_once(config: Path, tmp_path: Path, dry: list[str]) -> None:
    fifo = tmp_path / "layout.toml"
    os.mkfifo(fifo)
    _one_line_refusal(["partition", "apply", *dry, str(fifo)], config, "not a regular file")


@pytest.mark.parametrize(("name", "text", "says"), [
    ("layout.json", '{"nvidia": [' + "[" * 2000 + "]" * 2000 + "]}", "nests deeper than 64 levels"),
    ("layout.toml", "[[nvidia]]\ngpus = " + "[" * 2000 + "]" * 2000 + "\n", "nests deeper than 64 levels"),
    ("layout.toml", "[[nvidia]]\ngpus = " + "[" * 100 + "]" * 100 + "\n", "nests deeper than 64 levels"),
    ("layout.toml", "x" * (1 << 21), "larger than"),
], ids=["json-2000", "toml-2000", "toml-100", "too-large"])
def test_deep_or_large_layouts_are_one_line(config: Path, tmp_path: Path, name: str, text: str, says: str) -> None:
    (tmp_path / name).write_text(text)
    _one_line_refusal(["partition", "apply", "--dry-run", str(tmp_path / name)], config, says)


# One check for apply and --dry-run, every table before any GPU changes (issue 43, 6).

def _compute(host: str, index: int) -> str:
    return Path(f"{host}/sys/devices/pci0000:00/0000:{0x80 + index:02x}:00.0/current_compute_partition").read_text()


@pytest.mark.parametrize(("second", "says"), [
    ('compute = 7', "compute = '7': expected one of SPX, DPX, TPX, QPX, CPX"),
    ('compute = "CPX"\nxcc = 2', "unknown key 'xcc'"),
    ('memory = "NPS3"', "memory = 'NPS3': expected one of NPS1, NPS2, NPS4, NPS8"),
    ('compute = "SPX"\ngpus_ = 1', "unknown key 'gpus_'"),
], ids=["compute-number", "unknown-key", "memory-name", "unknown-key-2"])
@pytest.mark.parametrize("dry", [[], ["--dry-run"]], ids=["apply", "dry-run"])
def test_one_bad_amd_table_changes_no_gpu(fake_host: FakeHost, tmp_path: Path, second: str, says: str,
                                          dry: list[str]) -> None:
    host = fake_host(amd=2)
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path / "state"}"\n')
    layout = tmp_path / "layout.toml"
    layout.write_text(f'[[amd]]\ngpus = [0]\ncompute = "CPX"\n\n[[amd]]\ngpus = [1]\n{second}\n')
    _one_line_refusal(["partition", "apply", *dry, str(layout)], config, says)
    assert _compute(host, 0).strip() == _compute(host, 1).strip() == "SPX"  # GPU 0's table was good: unchanged


@pytest.mark.parametrize(("mig", "says"), [
    ('["1g.10gb"]', ""),
    ("[" + ", ".join(['"1g.10gb"'] * 1000) + "]", "mig names 1000 profiles: a GPU holds at most 7 MIG devices"),
    ("[1, 2]", "a layout is mig = [profile names]"),
    ('["9g.90gb"]', "9g.90gb refused"),
], ids=["good", "1000-profiles", "numbers", "no-such-profile"])
@pytest.mark.parametrize("dry", [[], ["--dry-run"]], ids=["apply", "dry-run"])
def test_mig_layouts_are_checked_alike_by_apply_and_dry_run(fake_host: FakeHost, tmp_path: Path, mig: str, says: str,
                                                            dry: list[str]) -> None:
    import subprocess
    import sys

    from .test_admin import HOOK

    host = fake_host(nvidia=1, mig_capable=True)
    config = tmp_path / "config.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path / "state"}"\n')
    layout = tmp_path / "layout.toml"
    layout.write_text(f"[[nvidia]]\ngpus = [0]\nmig = {mig}\n")
    if says:
        _one_line_refusal(["partition", "apply", *dry, str(layout)], config, says)
    else:
        code = f"import sys\nsys.path.insert(0, {HOOK!r})\nfrom gpuhook.cli.admin import main\nsys.exit(main())"
        done = subprocess.run([sys.executable, "-I", "-c", code, "partition", "apply", *dry, str(layout)],
                              capture_output=True, text=True, check=False, timeout=30,
                              env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
        assert done.returncode == 0, done.stderr
        assert ("would put NVIDIA GPU" if dry else "MIG off -> 1g.10gb") in done.stdout, done.stdout
    calls = Path(f"{host}/var/lib/gpuhook-sim/nvml.log")
    made = calls.read_text().split() if calls.exists() else []
    assert ("create-gi" in made) == (not dry and not says)
