from __future__ import annotations

import pytest

from gpuhook.frozen import frozen


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
