"""Image requirements (NVIDIA_REQUIRE_*, CUDA_VERSION, gpuhook.dev/require): grammar and evaluation. Pure.

Grammar, as the CUDA images use it: within one value, a space separates alternatives (any may hold)
and a comma joins conditions (all must hold); separate variables must all hold. A condition is
KEY OP VALUE with KEY one of cuda, driver, arch, brand (and rocm in the annotation) and OP one of
>= > = <= <; brand takes = only.
"""

from __future__ import annotations

from gpuhook.errors import RequestError
from gpuhook.frozen import frozen
from gpuhook.request.ids import is_decimal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

OPS = (">=", "<=", "=", ">", "<")  # two-character operators first
NVIDIA_KEYS = ("cuda", "driver", "arch", "brand")
ANNOTATION = "gpuhook.dev/require"
_DIGITS = 9  # per version part: versions are compared as numbers, and no version has longer parts


@frozen
class Condition:
    """One KEY OP VALUE test."""

    key: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.key}{self.op}{self.value}"


@frozen
class Requirement:
    """One variable's (or the annotation's) requirement: alternatives of conjunctions."""

    source: str
    raw: str
    alternatives: tuple[tuple[Condition, ...], ...]


@frozen
class Facts:
    """What the host (and one GPU) offers; None where unknown."""

    cuda: str | None = None
    driver: str | None = None
    arch: str | None = None
    brand: str | None = None
    rocm: str | None = None

    def get(self, key: str) -> str | None:
        """The fact a condition key names."""
        value: str | None = getattr(self, key)
        return value


def parse(source: str, raw: str, keys: tuple[str, ...] = NVIDIA_KEYS) -> Requirement:
    """Parse one requirement value; RequestError names the source and quotes the value."""
    alternatives = []
    for alternative in raw.split():
        conds = tuple(_condition(source, raw, c.strip(), keys) for c in alternative.split(",") if c.strip())
        if conds:
            alternatives.append(conds)
    if not alternatives:
        raise RequestError(f"{source}={raw!r}: empty requirement")
    return Requirement(source, raw, tuple(alternatives))


def from_container(env: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[Requirement, ...]:
    """Every requirement the container states: NVIDIA_REQUIRE_* (unless NVIDIA_DISABLE_REQUIRE),
    CUDA_VERSION as cuda>=major.minor when no NVIDIA_REQUIRE_CUDA, and the gpuhook.dev/require annotation."""
    out: list[Requirement] = []
    disabled = env.get("NVIDIA_DISABLE_REQUIRE", "").strip().lower() not in ("", "0", "false", "no")
    if not disabled:
        for key in sorted(k for k in env if k.startswith("NVIDIA_REQUIRE_")):
            if env[key].strip():
                out.append(parse(key, env[key]))
        legacy = env.get("CUDA_VERSION", "").strip()
        if legacy and not env.get("NVIDIA_REQUIRE_CUDA", "").strip():
            parts = legacy.split(".")
            if len(parts) >= 2 and is_version(f"{parts[0]}.{parts[1]}"):
                out.append(Requirement("CUDA_VERSION", legacy, ((Condition("cuda", ">=", f"{parts[0]}.{parts[1]}"),),)))
    if annotations.get(ANNOTATION, "").strip():
        out.append(parse(ANNOTATION, annotations[ANNOTATION], (*NVIDIA_KEYS, "rocm")))
    return tuple(out)


def unmet(req: Requirement, facts: Facts) -> Condition | None:
    """None when some alternative holds; else the first failing condition of the first alternative.
    A condition on an unknown fact counts as holding (gpuhook cannot refuse on what it cannot see)."""
    first_failure: Condition | None = None
    for alternative in req.alternatives:
        failing = next((c for c in alternative if not holds(c, facts)), None)
        if failing is None:
            return None
        first_failure = first_failure or failing
    return first_failure


def holds(cond: Condition, facts: Facts) -> bool:
    """Whether one condition holds for these facts (unknown facts hold)."""
    have = facts.get(cond.key)
    if have is None:
        return True
    if cond.key == "brand":
        return have.lower() == cond.value.lower()
    a, b = version_tuple(have), version_tuple(cond.value)
    return {">=": a >= b, ">": a > b, "=": a == b, "<=": a <= b, "<": a < b}[cond.op]


def version_tuple(version: str, width: int = 3) -> tuple[int, ...]:
    """'12.4' -> (12, 4, 0): numeric, zero-padded, so that 12.4 == 12.4.0 and 535.54.03 > 535.54."""
    nums = [int(p) for p in version.split(".") if is_decimal(p) and len(p) <= _DIGITS]
    return tuple(nums + [0] * (width - len(nums)))


def in_window(version: str, span: tuple[str, str]) -> bool:
    """Whether release `version` lies in (oldest, newest) by major.minor, as support matrices count releases."""
    mm = version_tuple(version)[:2]
    return version_tuple(span[0])[:2] <= mm <= version_tuple(span[1])[:2]


def is_version(text: str, parts: int = 3) -> bool:
    """Up to `parts` dot-separated ASCII numbers of at most 9 digits each: 12.4, 535.54.03, 6.2.1."""
    split = text.split(".")
    return len(split) <= parts and all(is_decimal(p) and len(p) <= _DIGITS for p in split)


def _condition(source: str, raw: str, text: str, keys: tuple[str, ...]) -> Condition:
    for op in OPS:
        key, sep, value = text.partition(op)
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key not in keys:
            break
        if not value or any(o in value for o in "<>="):
            break
        if key == "brand" and op != "=":
            raise RequestError(f"{source}={raw!r}: brand takes only '=' (in {text!r})")
        if key != "brand" and not is_version(value, 4):
            break
        return Condition(key, op, value)
    raise RequestError(f"{source}={raw!r}: cannot read {text!r}; expected KEY OP VERSION with KEY one of "
                       f"{', '.join(keys)} and OP one of {' '.join(OPS)} (e.g. cuda>=12.4)")
