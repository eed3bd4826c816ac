"""`gpuhook config show|set|default`, `--version`, and `simulate`'s refusals, through the real command line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gpuhook.cli.config_commands import default_text
from gpuhook.config import from_table

from .test_admin import _gpuhook


def test_default_is_the_shipped_file_and_valid(tmp_path: Path) -> None:
    done = _gpuhook(["config", "default"], tmp_path / "none.toml")
    assert done.returncode == 0 and done.stdout == default_text()
    shipped = Path(__file__).parents[3] / "runtime-config/config.toml"  # the file the README links
    assert shipped.read_text() == done.stdout
    from_table(tomllib.loads(done.stdout), "default")  # the schema accepts it


def test_set_checks_then_writes_and_show_reads_it_back(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('# mine\nhost_root = "/"\n')
    done = _gpuhook(["config", "set", "policy.requests=allocated", "log_level=debug", "tuning.clocks_mhz=[500, 2000]"],
                    config)
    assert done.returncode == 0, done.stderr
    text = config.read_text()
    assert text.startswith("# mine\n")  # comments kept
    table = tomllib.loads(text)
    assert table["policy"]["requests"] == "allocated" and table["log_level"] == "debug"
    assert table["tuning"]["clocks_mhz"] == [500, 2000]
    shown = _gpuhook(["config", "show"], config)
    assert shown.returncode == 0 and shown.stdout.startswith(f"# gpuhook config in effect: {config}\n")
    effective = tomllib.loads(shown.stdout)
    assert effective["policy"]["requests"] == "allocated" and effective["runtime"] == "runc"  # a default filled in


@pytest.mark.parametrize(("pair", "says"), [
    ("policy.requests=everything", "policy.requests"),
    ("no_such_key=1", "unknown key 'no_such_key'"),
    ("hook_timeout=soon", "hook_timeout"),
    ("justakey", "expected KEY=VALUE"),
], ids=["bad enum", "unknown key", "bad type", "no value"])
def test_set_refuses_what_the_schema_refuses(tmp_path: Path, pair: str, says: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text('host_root = "/"\n')
    done = _gpuhook(["config", "set", pair], config)
    assert done.returncode == 1 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert config.read_text() == 'host_root = "/"\n'  # unchanged


def test_show_on_an_absent_named_file_is_an_error(tmp_path: Path) -> None:
    done = _gpuhook(["config", "show"], tmp_path / "absent.toml")
    assert done.returncode == 1 and "does not exist" in done.stderr  # named explicitly (GPUHOOK_CONFIG): an error


def test_version(tmp_path: Path) -> None:
    done = _gpuhook(["--version"], tmp_path / "c.toml")
    assert done.returncode == 0 and done.stdout.startswith("gpuhook 0.")


@pytest.mark.parametrize(("args", "says"), [
    (["--nvidia", "-1"], "'-1' is not a GPU count from 0 to 64"),
    (["--amd", "65"], "'65' is not a GPU count from 0 to 64"),
], ids=["negative", "too many"])
def test_simulate_refuses_bad_counts(tmp_path: Path, args: list[str], says: str) -> None:
    done = _gpuhook(["simulate", "--root", str(tmp_path / "h"), *args], tmp_path / "c.toml")
    assert done.returncode == 2 and says in done.stderr and not (tmp_path / "h").exists()


def test_simulate_does_not_replace_a_host_silently(tmp_path: Path) -> None:
    host = tmp_path / "h"
    first = _gpuhook(["simulate", "--root", str(host), "--nvidia", "1"], tmp_path / "c.toml")
    assert first.returncode == 0, first.stderr
    marker = host / "proc/driver/nvidia/version"
    again = _gpuhook(["simulate", "--root", str(host), "--amd", "1"], tmp_path / "c.toml")
    assert again.returncode == 1 and "--replace rebuilds it" in again.stderr and marker.exists()
    replaced = _gpuhook(["simulate", "--root", str(host), "--amd", "1", "--replace"], tmp_path / "c.toml")
    assert replaced.returncode == 0 and not marker.exists() and (host / "dev/kfd").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine/data").write_text("x")
    other = _gpuhook(["simulate", "--root", str(tmp_path / "mine"), "--replace"], tmp_path / "c.toml")
    assert other.returncode == 1 and "was not made by gpuhook simulate" in other.stderr


def _one_line_refusal(args: list[str], config: Path, says: str) -> None:
    """The real command line within a deadline (a FIFO once hung it): exit 1, one line naming `says`."""
    import os
    import subprocess
    import sys

    from .test_admin import HOOK

    code = f"import sys\nsys.path.insert(0, {HOOK!r})\nfrom gpuhook.cli.admin import main\nsys.exit(main())"
    done = subprocess.run([sys.executable, "-I", "-c", code, *args], capture_output=True, text=True, check=False,
                          timeout=30, env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)})
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert says in done.stderr


@pytest.mark.parametrize(("pairs", "says"), [
    (["runtime.x=1"], "runtime is a value, not a table"),
    (["policy.requests.deeper.still=1"], "policy.requests is a value, not a table"),
    (["=1"], "expected KEY=VALUE"),
    (["policy..requests=any"], "expected KEY=VALUE"),
], ids=["through-a-string", "through-a-nested-string", "no-key", "empty-part"])
def test_set_through_a_value_is_one_line(tmp_path: Path, pairs: list[str], says: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text('runtime = "runc"\n[policy]\nrequests = "any"\n')
    _one_line_refusal(["config", "set", "--config", str(config), *pairs], config, says)
    assert config.read_text() == 'runtime = "runc"\n[policy]\nrequests = "any"\n'


def test_set_on_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    _one_line_refusal(["config", "set", "--config", str(fifo), "runtime=crun"], tmp_path / "none.toml",
                      "not a regular file")


def test_set_on_a_deep_file_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("x = " + "[" * 2000 + "]" * 2000 + "\n")
    _one_line_refusal(["config", "set", "--config", str(config), "runtime=crun"], config, f"config {config}")
    _one_line_refusal(["config", "show"], config, f"config {config}")
