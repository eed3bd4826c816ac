"""What request parsing knows of a vendor. Types only (nothing at run time: typing costs 2 MiB where it loads):
callers pass vendors.registry.all_vendors(), whose members have all of it (the vendors' protocol)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class Terms(Protocol):
        """What request parsing knows of a vendor: its name, the env keys images carry, its identifier forms
        (the vendors' protocol has them; callers pass vendors.registry.all_vendors())."""

        @property
        def NAME(self) -> str: ...
        @property
        def ENV_KEY(self) -> str: ...
        @property
        def CAPABILITIES_ENV(self) -> str | None: ...
        @property
        def NONE_MEANS_DRIVER(self) -> bool: ...
        @property
        def DOCKER_GPUS_HOOK(self) -> str | None: ...
        def parse_id(self, item: str) -> str | None: ...
