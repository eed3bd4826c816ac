from __future__ import annotations

from pathlib import Path

import pytest

from gpuhook.config import Config, Policy, from_table, load
from gpuhook.configfile import read_table
from gpuhook.errors import ConfigError


def test_defaults() -> None:
    c = from_table({}, "/etc/gpuhook/config.toml")
    assert (c.host_root, c.runtime, c.state_dir, c.log_file, c.policy) == ("/", "runc", "/run/gpuhook", None,
                                                                          Policy(accept_env_requests=True))


def test_full() -> None:
    c = from_table({"host_root": "/srv/h", "runtime": "/usr/sbin/runc", "log_file": "/var/log/g.log",
                    "log_level": "debug", "policy": {"accept_env_requests": False}}, "p")
    assert c == Config(path="p", host_root="/srv/h", runtime="/usr/sbin/runc", log_file="/var/log/g.log",
                       log_level="debug", policy=Policy(False))


BAD = [
    ("unknown top key", {"hostroot": "/"}, ["unknown key 'hostroot'", "host_root"]),
    ("unknown policy key", {"policy": {"accept_env": True}}, ["'policy.accept_env'", "accept_env_requests"]),
    ("wrong type", {"policy": {"accept_env_requests": "yes"}}, ["policy.accept_env_requests", "boolean"]),
    ("relative root", {"host_root": "srv"}, ["host_root"]),
    ("bad level", {"log_level": "loud"}, ["log_level"]),
]


@pytest.mark.parametrize(("table", "needles"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_errors_name_the_key(table: dict[str, object], needles: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        from_table(table, "/etc/gpuhook/config.toml")
    for needle in [*needles, "/etc/gpuhook/config.toml"]:
        assert needle in str(info.value)


def test_env_path_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUHOOK_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="GPUHOOK_CONFIG"):
        load()


def test_default_path_may_be_absent(tmp_path: Path) -> None:
    assert read_table(str(tmp_path / "absent.toml"), explicit=False) == {}


def test_bad_toml(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text("runtime = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_table(str(p), explicit=True)


def test_shipped_default_config_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(__file__).parents[2] / "runtime-config" / "config.toml"
    monkeypatch.setenv("GPUHOOK_CONFIG", str(path))
    assert load().runtime == "runc"
