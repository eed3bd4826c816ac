"""The warm helper's two sides agree: the socket, the message limit and the state limit are written in C
(cli/native/warm.h, hook.c) and in Python (cli/warm.py, cli/hook.py)."""

from __future__ import annotations

from pathlib import Path

from gpuhook.cli import hook, warm

NATIVE = Path(warm.__file__).parent / "native"


def _define(source: str, name: str) -> str:
    for line in (NATIVE / source).read_text().splitlines():
        if line.startswith(f"#define {name} "):
            return line.split(None, 2)[2].split("/*")[0].strip()
    raise AssertionError(f"{name} is not defined in {source}")


def test_the_socket_and_the_limits_are_the_same_on_both_sides() -> None:
    assert _define("warm.h", "WARM_SOCKET") == f'"{warm.SOCKET}"'
    assert _define("warm.h", "WARM_MAX") == "(64 << 10)" and warm.MAX_MESSAGE == 64 << 10
    assert _define("hook.c", "MAX_STATE") == "(1 << 20)" and hook.MAX_STATE == 1 << 20
    assert warm.VERSION.decode() in (NATIVE / "warm.h").read_text()
