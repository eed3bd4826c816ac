from __future__ import annotations

import marshal
import os
import stat
from pathlib import Path

import pytest

from gpuhook.config import Config, Exporter, Policy, from_table, load
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
                       log_level="debug", policy=Policy(accept_env_requests=False))


def test_exporter_table() -> None:
    assert from_table({}, "p").exporter == Exporter("127.0.0.1:9835", None, 15.0, True)
    c = from_table({"exporter": {"listen": "[::1]:9400", "textfile_dir": "/var/lib/node_exporter", "interval": 30,
                                 "telemetry": False}}, "p")
    assert c.exporter == Exporter("[::1]:9400", "/var/lib/node_exporter", 30, False)


BAD = [
    ("unknown top key", {"hostroot": "/"}, ["unknown key 'hostroot'", "host_root"]),
    ("unknown policy key", {"policy": {"accept_env": True}}, ["'policy.accept_env'", "accept_env_requests"]),
    ("wrong type", {"policy": {"accept_env_requests": "yes"}}, ["policy.accept_env_requests", "boolean"]),
    ("relative root", {"host_root": "srv"}, ["host_root"]),
    ("bad level", {"log_level": "loud"}, ["log_level"]),
    ("exporter listen without a port", {"exporter": {"listen": "0.0.0.0"}}, ["exporter.listen"]),
    ("unknown exporter key", {"exporter": {"port": 9835}}, ["'exporter.port'", "listen", "textfile_dir"]),
    ("exporter interval", {"exporter": {"interval": 0}}, ["exporter.interval"]),
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


def _write(p: Path, text: str) -> None:
    p.write_text(text)


def test_cache_serves_the_parsed_table_and_notices_changes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cfg = tmp_path / "c.toml"
    _write(cfg, 'runtime = "runc"\n')
    assert read_table(str(cfg), True, str(cache)) == {"runtime": "runc"}
    assert len(os.listdir(cache)) == 1 and stat.S_IMODE(cache.stat().st_mode) == 0o700
    _write(cfg, 'runtime = "/usr/sbin/crun"\n')  # a different size and mtime
    assert read_table(str(cfg), True, str(cache)) == {"runtime": "/usr/sbin/crun"}


def _cached(tmp_path: Path) -> tuple[Path, Path, Path, object]:
    """A config read once through the cache: (config, cache dir, cache entry, the entry's key)."""
    cache, cfg = tmp_path / "cache", tmp_path / "c.toml"
    _write(cfg, 'runtime = "runc"\n')
    read_table(str(cfg), True, str(cache))
    (entry,) = cache.iterdir()
    key, _, _ = marshal.loads(entry.read_bytes())
    return cfg, cache, entry, key


def test_cache_is_really_used(tmp_path: Path) -> None:
    cfg, cache, entry, key = _cached(tmp_path)
    entry.write_bytes(marshal.dumps((key, {"runtime": "from-cache"}, False)))
    assert read_table(str(cfg), True, str(cache)) == {"runtime": "from-cache"}


def test_cache_written_by_others_is_ignored(tmp_path: Path) -> None:
    cfg, cache, entry, key = _cached(tmp_path)
    entry.write_bytes(marshal.dumps((key, {"runtime": "/tmp/evil"}, True)))
    os.chmod(cache, 0o777)  # a directory anyone could have written into
    assert read_table(str(cfg), True, str(cache)) == {"runtime": "runc"}
    os.chmod(cache, 0o700)
    os.chmod(entry, 0o666)
    assert read_table(str(cfg), True, str(cache)) == {"runtime": "runc"}


def test_cache_entry_behind_a_symlink_is_ignored(tmp_path: Path) -> None:
    cfg, cache, entry, key = _cached(tmp_path)
    evil = tmp_path / "evil"
    evil.write_bytes(marshal.dumps((key, {"runtime": "/tmp/evil"}, True)))
    os.unlink(entry)
    os.symlink(evil, entry)
    assert read_table(str(cfg), True, str(cache)) == {"runtime": "runc"}


def test_toml_values_that_marshal_cannot_hold_still_parse(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    _write(cfg, "when = 1979-05-27T07:32:00Z\n")
    assert "when" in read_table(str(cfg), True, str(tmp_path / "cache"))


def test_validation_is_remembered_per_file_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuhook.config as config_module

    cfg = tmp_path / "c.toml"
    _write(cfg, 'runtime = "runc"\n')
    monkeypatch.setenv("GPUHOOK_CONFIG", str(cfg))
    assert load().runtime == "runc"  # validated once, remembered in the cache

    def refuse(table: object, path: str) -> None:
        raise ConfigError("validated again")

    monkeypatch.setattr(config_module, "_validate", refuse)
    assert load().runtime == "runc"  # same file version: no second validation
    _write(cfg, 'runtime = "crun"\n')
    with pytest.raises(ConfigError, match="validated again"):
        load()


def test_log_max_bytes_rotates_before_a_writer_opens(tmp_path: Path) -> None:
    from gpuhook import logs
    from gpuhook.config import Config

    log = tmp_path / "gpuhook.log"
    log.write_text("x" * 2000)
    config = Config(path="c", log_file=str(log), log_max_bytes=1000)
    logs.logger(config, "c1", "test").info("hello")
    assert (tmp_path / "gpuhook.log.1").read_text() == "x" * 2000
    assert '"event": "hello"' in log.read_text() and len(log.read_text()) < 1000
    logs.logger(config, "c2", "test").info("again")  # under the limit: no rotation
    assert (tmp_path / "gpuhook.log.1").read_text() == "x" * 2000 and "again" in log.read_text()


def test_the_state_file_names_state_dir_under_the_configs_identity_and_is_pruned_with_it(tmp_path: Path) -> None:
    from gpuhook.configfile import prune_cache, remember_state

    cache, config = tmp_path / "cache", tmp_path / "c.toml"
    config.write_text('state_dir = "/run/x"\n')
    remember_state(str(config), "/run/x", str(cache))
    (state,) = cache.iterdir()
    assert state.name.endswith("c.toml.state") and "%2F" in state.name
    st = config.stat()
    assert state.read_text() == (f"key {st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}\n"
                                 "state /run/x\n")
    assert oct(state.stat().st_mode & 0o777) == "0o600"
    config.write_text('state_dir = "/run/y"\n')  # changed: its state file is no longer this config's
    assert prune_cache(str(cache)) == [str(state)]


@pytest.mark.parametrize("text", ["x = " + "[" * 2000 + "]" * 2000, "x = " + "{a = " * 100 + "1" + "}" * 100],
                         ids=["array-2000", "inline-tables-100"])
def test_a_deep_config_is_a_config_error_not_recursion(tmp_path: Path, text: str) -> None:
    """Issue 43, 7: TOML nested past the bound is the config's one line, before the schema check could recurse."""
    from gpuhook.configfile import read_config

    path = tmp_path / "config.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError, match=f"config {path} is not valid TOML: .*nests deeper than 64 levels"):
        read_config(str(path), True, cache_dir=None)
