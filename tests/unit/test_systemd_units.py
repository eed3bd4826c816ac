"""The shipped CDI refresh units: the path unit watches what a driver install rewrites and starts the service,
which regenerates only what changed; systemd itself checks them where it is installed."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

UNITS = Path(__file__).parents[2] / "packaging/systemd"


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNITS / name)
    return parser


def test_the_path_unit_starts_the_service_after_driver_changes() -> None:
    path = _unit("gpuhook-cdi-refresh.path")
    watched = [line.split("=", 1)[1] for line in (UNITS / "gpuhook-cdi-refresh.path").read_text().splitlines()
               if line.startswith("PathChanged=")]
    assert watched == ["/lib/modules/%v/modules.dep", "/lib/modules/%v/modules.dep.bin", "/etc/ld.so.cache"]
    assert path["Path"]["Unit"] == "gpuhook-cdi-refresh.service"
    service = _unit("gpuhook-cdi-refresh.service")
    assert service["Service"]["Type"] == "oneshot"
    assert service["Service"]["ExecStart"] == "/usr/local/bin/gpuhook cdi generate --if-changed"
    assert service["Install"]["WantedBy"] == path["Install"]["WantedBy"] == "multi-user.target"  # also at boot


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_takes_them(tmp_path: Path) -> None:
    for name in ("gpuhook-cdi-refresh.path", "gpuhook-cdi-refresh.service"):  # as install.sh writes them
        (tmp_path / name).write_text((UNITS / name).read_text().replace("/usr/local/bin/gpuhook", "/bin/true"))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "gpuhook-cdi-refresh.path"),
                           str(tmp_path / "gpuhook-cdi-refresh.service")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_warm_helper_unit_runs_the_daemon_and_comes_back() -> None:
    service = _unit("gpuhook-warm.service")
    assert service["Service"]["ExecStart"] == "/usr/local/bin/gpuhook warm"
    assert service["Service"]["Restart"] == "always"  # it exits when gpuhook is reinstalled under it
    assert "ProtectSystem" not in service["Service"]  # its workers write bundles and mount into containers
    assert service["Install"]["WantedBy"] == "multi-user.target"
