from __future__ import annotations

import pytest

from gpuhook.frozen import KEYWORDS_ONLY_ABOVE, frozen


@frozen
class Point:
    x: int
    y: int = 0
    label: str = ""

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


def test_construction_positional_keyword_and_defaults() -> None:
    assert Point(1, 2).norm1() == 3
    p = Point(1, label="a")
    assert (p.x, p.y, p.label) == (1, 0, "a")


def test_value_semantics() -> None:
    assert Point(1, 2) == Point(x=1, y=2)
    assert Point(1, 2) != Point(2, 1)
    assert len({Point(1, 2), Point(1, 2), Point(3)}) == 2
    assert repr(Point(1, 2, "z")) == "Point(x=1, y=2, label='z')"
    assert Point(1) != (1, 0, "")


def test_frozen_and_slotted() -> None:
    p = Point(1)
    with pytest.raises(AttributeError, match="frozen"):
        p.x = 5  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        del p.x  # type: ignore[misc]
    assert not hasattr(p, "__dict__") and Point.__slots__ == ("x", "y", "label")


@pytest.mark.parametrize(("args", "kwargs"), [((), {}), ((1, 2, "a", 4), {}), ((1,), {"x": 2}), ((1,), {"z": 2})],
                         ids=["missing", "too many", "repeated", "unknown"])
def test_bad_arguments(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        Point(*args, **kwargs)  # type: ignore[arg-type, misc]


def test_match_args() -> None:
    match Point(1, 2):
        case Point(a, b):
            assert (a, b) == (1, 2)


def _wide_records() -> dict[str, int]:
    """The package's @frozen classes of more than four fields, by name (a name a narrower record has too is left
    out: the ast cannot tell the two apart, and the constructor's own check still holds)."""
    import ast
    from pathlib import Path

    counts: dict[str, set[int]] = {}
    for path in (Path(__file__).resolve().parents[2] / "hook/gpuhook").rglob("*.py"):
        for c in ast.walk(ast.parse(path.read_text())):
            if isinstance(c, ast.ClassDef) and any(isinstance(d, ast.Name) and d.id == "frozen"
                                                   for d in c.decorator_list):
                counts.setdefault(c.name, set()).add(sum(isinstance(s, ast.AnnAssign) for s in c.body))
    return {name: max(n) for name, n in counts.items() if min(n) > KEYWORDS_ONLY_ABOVE}


def test_wide_records_are_built_with_keywords_everywhere() -> None:
    """No call in hook/ or tests/ builds a record of more than four fields positionally (a reordering of its fields
    would be silent); the constructor refuses it too, where it runs."""
    import ast
    from pathlib import Path

    wide = _wide_records()
    assert {"Gpu", "ContainerRecord", "Engine", "Knob", "Tuning"} <= set(wide)
    root = Path(__file__).resolve().parents[2]
    positional = []
    for path in [*(root / "hook/gpuhook").rglob("*.py"), *(root / "tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and node.args:
                called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if called in wide:
                    positional.append(f"{path.relative_to(root)}:{node.lineno}: {called}")
    assert positional == []


def test_a_wide_record_refuses_positional_arguments() -> None:
    @frozen
    class Wide:
        a: int = 0
        b: int = 0
        c: int = 0
        d: int = 0
        e: int = 0

    assert Wide(a=1, e=5).e == 5 and Point(1, 2).y == 2  # four fields or fewer: positional still serves
    with pytest.raises(TypeError, match="Wide\\(\\) has 5 fields: build it with keywords"):
        Wide(1)  # type: ignore[misc]
