"""The warm helper's two sides agree: the socket, the message limit and the state limit are written in C
(cli/native/warm.h, hook.c) and in Python (cli/warm.py, cli/warm_trust.py, cli/hook.py)."""

from __future__ import annotations

from pathlib import Path

from gpuhook.cli import hook, warm, warm_trust

NATIVE = Path(warm.__file__).parent / "native"


def _define(source: str, name: str) -> str:
    for line in (NATIVE / source).read_text().splitlines():
        if line.startswith(f"#define {name} "):
            return line.split(None, 2)[2].split("/*")[0].strip()
    raise AssertionError(f"{name} is not defined in {source}")


def test_the_socket_and_the_limits_are_the_same_on_both_sides() -> None:
    assert _define("warm.h", "WARM_SOCKET") == f'"{warm.SOCKET}"'
    assert _define("warm.h", "WARM_MAX") == "(64 << 10)" and warm_trust.MAX_MESSAGE == 64 << 10
    assert _define("hook.c", "MAX_STATE") == "(1 << 20)" and hook.MAX_STATE == 1 << 20
    assert warm_trust.VERSION.decode() in (NATIVE / "warm.h").read_text()


def test_the_native_hook_knows_an_empty_ledger_as_the_ledger_writes_it() -> None:
    """native/hook.c answers a poststop itself for a ledger rendered exactly as tuning/ledger.py renders an empty
    one; a change to that rendering must change hook.c (or every such poststop would start Python again)."""
    from gpuhook.tuning import ledger

    text = ledger.render({**ledger.empty(), "seq": 42})
    head, _, tail = text.partition("42")
    source = (NATIVE / "hook.c").read_text()

    def c_literal(s: str) -> str:
        return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    assert f'head[] = "{c_literal(head)}"' in source
    assert f'tail[] = "{c_literal(tail)}"' in source
