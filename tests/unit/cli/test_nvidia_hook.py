"""nvidia-container-runtime-hook, gpuhook's: NVIDIA's command line, a no-op behind gpuhook's shim, hook mode else."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from gpuhook.apply import containers
from gpuhook.cli import nvidia_hook


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


@pytest.fixture
def hook_calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, bytes]]:
    """The calls into `gpuhook hook` (stage, state), with a config whose state_dir is tmp_path/state."""
    calls: list[tuple[str, bytes]] = []
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n')
    monkeypatch.setenv("GPUHOOK_CONFIG", str(config))
    monkeypatch.setattr("gpuhook.cli.hook.main", lambda stage, folders=None, data=b"": calls.append((stage, data)) or 0)
    return calls


@pytest.mark.parametrize(("argv", "code", "called"), [
    (["prestart"], 0, True),
    (["-config", "/etc/nvidia-container-runtime/config.toml", "prestart"], 0, True),  # NVIDIA's settings: ignored
    (["--config=/x", "-debug", "prestart"], 0, True),
    (["poststart"], 0, False), (["poststop"], 0, False),
    ([], 2, False), (["frobnicate"], 2, False), (["-bogus", "prestart"], 2, False),
], ids=["prestart", "config-flag", "go-flag-forms", "poststart", "poststop", "none", "unknown", "unknown-flag"])
def test_nvidias_command_line(argv: list[str], code: int, called: bool, hook_calls: list[tuple[str, bytes]],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    state = json.dumps({"ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 1, "bundle": "/b"}).encode()
    monkeypatch.setattr("sys.stdin", _Stdin(state))
    assert nvidia_hook.main(argv) == code
    assert hook_calls == ([("prestart", state)] if called else [])


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert nvidia_hook.main(["-version"]) == 0
    assert "compatible with NVIDIA Container Runtime Hook" in capsys.readouterr().out


def test_a_container_the_shim_prepared_is_left_alone(hook_calls: list[tuple[str, bytes]], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """gpuhook-runtime as the runtime recorded it (and injected its GPUs): the hook must not add them again."""
    import os

    from gpuhook.host.processes import start_time

    me = os.getpid()
    containers.save(str(tmp_path / "state"), containers.ContainerRecord(id="c1", drivers=(("nvidia", "550"),),
                                                                        runtime_root=str(tmp_path),
                                                                        creator=me, creator_start=start_time(me)))
    monkeypatch.setattr("sys.stdin", _Stdin(json.dumps({"id": "c1", "pid": 1, "bundle": "/b"}).encode()))
    assert nvidia_hook.main(["prestart"]) == 0 and hook_calls == []
    monkeypatch.setattr("sys.stdin", _Stdin(json.dumps({"id": "c2", "pid": 1, "bundle": "/b"}).encode()))
    assert nvidia_hook.main(["prestart"]) == 0 and [c[0] for c in hook_calls] == ["prestart"]
