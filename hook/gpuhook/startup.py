"""Start-up cost is a feature: the rules, written once. tests/unit/test_startup.py enforces them.

gpuhook runs in front of every container on a host, and runc waits for each of its hooks. Three paths are
hot, and each may import only what it needs:

- **pass-through** (`gpuhook-runtime` for a container without a GPU request): `cli.shim`, `configfile`,
  `errors`. With the native front end (cli/native/runtime.c) such a container never starts Python at all;
  the markers both look for are `gpuhook.dev/` and `_VISIBLE_DEVICES` (vendors.registry).
- **GPU path** (`gpuhook-runtime` or `gpuhook hook prestart` for a GPU container): the request, host, plan
  and apply modules of the vendors named; no module in `HEAVY`, except ctypes where a CUDA requirement asks
  the host's libcuda, or a hook enters the container's namespaces.
- **poststop** (`gpuhook hook poststop`, after every hooked container): no argparse, no GPU path.
- **Docker's --gpus hook** (`nvidia-container-runtime-hook prestart`, cli/nvidia_hook.py): the GPU path under plain
  runc; behind gpuhook's shim (which drops it from the spec) only a look at the container's record.

How the code keeps to it, so that no module needs to say it again:
- `TYPE_CHECKING = False` and `if TYPE_CHECKING:` for imports that only type checkers need (typing,
  collections.abc, other gpuhook modules' types): mypy treats them as type-only, Python never runs them.
- logs.py writes structlog's JSON lines itself (os.write of one line; nothing opened before the first line):
  structlog and its logging/datetime cost ~65 ms per process with a log_file set.
- `@frozen` (frozen.py) instead of dataclasses (about 30 ms), `fastjson` instead of json (about 9 ms with
  re, enum and functools), `proc.run` instead of subprocess (12-25 ms), hand-written parsers instead of re.
- Heavy or optional modules (jsonschema, tomlkit, pynvml, amdsmi, the image checks, the ledger)
  are imported inside the function that needs them, on the path that needs them.
- Every `__init__.py` of a room is empty; the package's own holds the version only.
Measure with `python -X importtime` and tests/perf/bench.py.
"""

from __future__ import annotations

# Modules the hot paths must not load (their top-level package names)
HEAVY = frozenset({"json", "re", "enum", "typing", "collections", "functools", "contextlib", "dataclasses", "copy",
                   "subprocess", "ctypes", "logging", "hashlib", "shutil", "inspect", "ast", "datetime", "tomllib",
                   "structlog", "jsonschema", "tomlkit", "pynvml", "amdsmi", "grpc", "google",
                   "prometheus_client"})
