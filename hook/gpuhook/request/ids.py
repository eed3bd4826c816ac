"""GPU identifiers in requests: indices, ranges, PCI addresses, and each vendor's own UUID form. Pure.

Checked by hand, not with `re` (milliseconds to import on the GPU path: see gpuhook.startup).
"""

from __future__ import annotations

from gpuhook.errors import RequestError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.request.terms import Terms

_HEX = frozenset("0123456789abcdefABCDEF")
MAX_INDEX = 1023  # no host has more GPUs: ranges are bounded by this, not by the numbers a request names
MAX_LIST = 4096  # characters in one GPU list: its cost is linear in this, whatever it names


def check_length(key: str, raw: str) -> None:
    """RequestError for a GPU list too long to be one."""
    if len(raw) > MAX_LIST:
        raise RequestError(f"{key} is {len(raw)} characters long: a GPU list has at most {MAX_LIST}")


def parse_item(key: str, raw: str, item: str, vendors: Sequence[Terms]) -> list[str]:
    """The normalised identifiers one comma item of a GPU list names, `vendors` reading their own forms;
    RequestError naming the forms."""
    if is_decimal(item):
        return [str(_index(key, raw, item))]
    first, dash, last = item.partition("-")
    if dash and is_decimal(first) and is_decimal(last) and _index(key, raw, first) <= _index(key, raw, last):
        return [str(i) for i in range(int(first), int(last) + 1)]
    for vendor in vendors:
        ident = vendor.parse_id(item)
        if ident is not None:
            return [ident]
    if pci_parts(item):
        return [normalize_pci(item)]
    raise RequestError(f"{key}={raw!r}: cannot read {item!r} as a GPU; expected all, none, an index (0), "
                       "a range (0-3), a UUID (GPU-… or 0x…), a PCI address (0000:3b:00.0) or a MIG device "
                       "(MIG-… or <gpu>:<mig>, e.g. 0:1)")


def _index(key: str, raw: str, text: str) -> int:
    if len(text.lstrip("0")) > 4 or int(text) > MAX_INDEX:
        raise RequestError(f"{key}={raw[:64]!r}: GPU index {text[:16]}{'…' if len(text) > 16 else ''} is beyond "
                           f"any host (at most {MAX_INDEX + 1} GPUs)")
    return int(text)


def normalize_pci(address: str) -> str:
    """A PCI address in the kernel's long form, lower case: 0000:3b:00.0."""
    parts = pci_parts(address.strip())
    if not parts:
        raise RequestError(f"not a PCI address: {address!r}")
    domain, bus, device, function = parts
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


def pci_parts(text: str) -> tuple[str, str, str, str] | None:
    """[domain:]bus:device.function (domain 4-8 hex digits, bus and device 2, function 0-7), split; else None."""
    rest, dot, function = text.rpartition(".")
    fields = rest.split(":")
    if not dot or len(function) != 1 or function not in "01234567" or len(fields) not in (2, 3):
        return None
    domain = fields[0] if len(fields) == 3 else ""
    bus, device = fields[-2:]
    if (domain and not is_hex(domain, 4, 8)) or not is_hex(bus, 2, 2) or not is_hex(device, 2, 2):
        return None
    return domain, bus, device, function


def is_decimal(text: str) -> bool:
    """ASCII digits only (str.isdigit also takes other scripts' digits)."""
    return text.isascii() and text.isdigit()


def is_hex(text: str, shortest: int, longest: int) -> bool:
    """Hex digits only, between `shortest` and `longest` of them."""
    return shortest <= len(text) <= longest and all(c in _HEX for c in text)
