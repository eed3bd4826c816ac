from __future__ import annotations

from pathlib import Path

import pytest

from gpuhook.cli.shim import RuncArgs

CASES = [
    ("containerd", ["--root", "/run/containerd/runc/k8s.io", "--log", "/run/x/log.json", "--log-format", "json",
                    "--systemd-cgroup", "create", "--bundle", "/run/b", "--pid-file", "/run/b/init.pid", "cid"],
     ("create", "/run/b", "cid", "/run/x/log.json", "json")),
    ("equals forms", ["--log=/l", "--log-format=json", "run", "--bundle=/b", "-d", "id1"],
     ("run", "/b", "id1", "/l", "json")),
    ("short bundle, default cwd", ["create", "-b", "bdir", "c2"], ("create", "bdir", "c2", None, "text")),
    ("no bundle", ["run", "c3"], ("run", ".", "c3", None, "text")),
    ("pass-through command", ["--root", "/r", "delete", "--force", "c4"], ("delete", ".", "c4", None, "text")),
    ("pid-file value not taken as id", ["create", "--pid-file", "p", "--console-socket", "s", "c5"],
     ("create", ".", "c5", None, "text")),
    ("version", ["--version"], (None, ".", "", None, "text")),
]


@pytest.mark.parametrize(("argv", "expect"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_runc_args(argv: list[str], expect: tuple[object, ...]) -> None:
    a = RuncArgs(argv)
    assert (a.command, a.bundle, a.container_id, a.log, a.log_format) == expect


def test_a_quoted_message_cannot_forge_logfmt_fields(tmp_path: Path) -> None:
    """runc's text log is logfmt: a message quoting the image's text must stay one msg value on one line."""
    from gpuhook.cli import shim

    log = tmp_path / "log"
    args = RuncArgs(["--log", str(log), "create", "x"])
    with pytest.raises(SystemExit):
        shim._fail(args, 'bad value "x" level=debug msg="forged"\nsecond line')
    (line,) = log.read_text().splitlines()
    assert line.startswith('time="') and line.endswith(
        ' level=error msg="gpuhook: bad value \\"x\\" level=debug msg=\\"forged\\" second line"')


@pytest.mark.parametrize(("log_format", "stderr"), [("json", "closed"), ("text", "closed"), ("json", "broken pipe")])
def test_the_log_gets_the_refusal_even_when_stderr_is_closed(tmp_path: Path, log_format: str, stderr: str) -> None:
    """containerd reads a runtime's error from --log: it must be there though the engine closed stderr, and
    the exit status is 1, not the 120 a failed flush at exit gives."""
    import json
    import subprocess
    import sys

    log = tmp_path / "log.json"
    code = ("import sys, time; sys.argv[0] = 'gpuhook-runtime'; from gpuhook.cli import shim; time.sleep(0.3); "
            f"shim._fail(shim.RuncArgs(['--log', {str(log)!r}, '--log-format', {log_format!r}, 'create', 'c']), "
            "'no GPU 7 on this host')")
    run = f"{sys.executable} -c \"{code}\""
    shell = f"{run} 2>&-" if stderr == "closed" else f"{run} 2>&1 >/dev/null | true; exit ${{PIPESTATUS[0]}}"
    r = subprocess.run(["bash", "-c", shell], check=False)
    assert r.returncode == 1
    text = log.read_text()
    if log_format == "json":
        entry = json.loads(text)
        assert (entry["level"], entry["msg"]) == ("error", "gpuhook: no GPU 7 on this host") and entry["time"]
    else:
        assert 'level=error msg="gpuhook: no GPU 7 on this host"' in text
