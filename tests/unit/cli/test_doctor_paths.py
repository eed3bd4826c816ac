from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gpuhook.cli import doctor_paths
from gpuhook.cli.launcher import NATIVE, NATIVE_SOURCES, sources_digest


def _bindir(tmp_path: Path, native: tuple[str, ...], digest: str | None) -> Path:
    for name, _ in NATIVE.values():
        (tmp_path / name).write_bytes(b"\x7fELF\x02" if name in native else b"#!/usr/bin/python3 -IS\n")
    if digest is not None:
        (tmp_path / NATIVE_SOURCES).write_text(digest + "\n")
    return tmp_path


ALL = tuple(name for name, _ in NATIVE.values())


@pytest.mark.parametrize(("native", "digest", "levels", "says"), [
    (ALL, "current", ["ok"], "built from this installation's sources"),
    (ALL, "0" * 64, ["warn"], "are stale"),
    (ALL, None, ["warn"], "no record of their sources"),
    (("gpuhook-hook", "gpuhook-createhook"), "current", ["warn"], "no native gpuhook-runtime"),
    ((), None, ["warn"] * 3, "starts Python"),
], ids=["current", "stale", "unrecorded", "python runtime", "none"])
def test_native_front_ends(tmp_path: Path, native: tuple[str, ...], digest: str | None, levels: list[str],
                           says: str) -> None:
    found = doctor_paths.native_front_ends(str(_bindir(tmp_path, native, sources_digest() if digest == "current"
                                                        else digest)))
    assert [f[0] for f in found] == levels
    assert says in found[0][1]
    assert all(f[2] for f in found if f[0] != "ok")  # every warning has its fix


def test_paths_name_the_warm_helper_only_when_it_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = _bindir(tmp_path, ALL, sources_digest())
    sock = tmp_path / "warm.sock"
    monkeypatch.setenv("GPUHOOK_WARM_SOCKET", str(sock))
    assert "start Python (the direct path)" in doctor_paths.checks(str(bindir))[-1][1]
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as listener:  # a helper's first answer: "A"
        listener.bind(str(sock))
        listener.listen(1)
        import threading

        def answer() -> None:
            conn, _ = listener.accept()
            conn.recv(64)
            conn.send(b"A")
            conn.close()

        t = threading.Thread(target=answer)
        t.start()
        assert "served by the warm helper" in doctor_paths.checks(str(bindir))[-1][1]
        t.join()
    assert doctor_paths.checks(str(_bindir(tmp_path, (), None)))[-1][1].startswith("paths: every container starts")
