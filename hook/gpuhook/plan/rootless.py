"""What gpuhook refuses to an engine without root on the host (rootless Podman or Docker: the runtime and its
hooks run as the user, in its user namespace): tuning, and GPUs given by its hook or runtime (CDI devices are the
way there). Pure."""

from __future__ import annotations

from gpuhook.errors import PolicyError
from gpuhook.request.knobs import CONTAINER, KNOBS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

WAY_OUT = ("ask for GPUs as CDI devices (podman run --device nvidia.com/gpu=0 or amd.com/gpu=0, specs from `gpuhook "
           "cdi generate`; --group-add keep-groups where the nodes need the user's render or video group)")
_NOTHING = ("", "void", "none")  # a *_VISIBLE_DEVICES value that asks for no GPU (CDI specs set void)


def host_keys(annotations: Mapping[str, object], env: Iterable[str] = ()) -> list[str]:
    """The tuning a container asks that changes the host (clocks, power, fans, exclusive GPUs, MPS): its
    gpuhook.dev/ annotations, and the GPUHOOK_* env twins of those an engine without annotations passes so."""
    names = {e.partition("=")[0] for e in env}
    return [f"gpuhook.dev/{k.key}" if f"gpuhook.dev/{k.key}" in annotations else k.env for k in KNOBS
            if k.scope != CONTAINER and (f"gpuhook.dev/{k.key}" in annotations or (k.from_env and k.env in names))]


def asks_gpus(annotations: Mapping[str, object], env: Iterable[str]) -> bool:
    """Whether a container asks gpuhook for anything: a gpuhook.dev/ annotation, a GPUHOOK_* tuning env key, or a
    vendor's *_VISIBLE_DEVICES naming GPUs (Docker's --gpus sets NVIDIA_VISIBLE_DEVICES; a CDI spec's void asks
    nothing)."""
    if any(str(k).startswith("gpuhook.dev/") for k in annotations) or host_keys({}, env):
        return True
    pairs = (e.partition("=") for e in env)
    return any(k.endswith("_VISIBLE_DEVICES") and v.strip().lower() not in _NOTHING for k, _, v in pairs)


def check(annotations: Mapping[str, object], host_uid: int, gives: str = "", env: Iterable[str] = ()) -> None:
    """PolicyError where gpuhook runs without root on the host (`host_uid` not 0) and the container asks for what
    needs it: tuning, or GPUs that `gives` ("gpuhook's hook", "gpuhook's runtime"; "": none asked of it) would
    give itself."""
    if host_uid == 0:
        return
    engine = f"this container's engine runs as uid {host_uid} on the host (a rootless engine: no root on the host)"
    asked = host_keys(annotations, env)
    if asked:
        raise PolicyError(f"{', '.join(asked)} asks gpuhook to change the host's GPUs, and {engine}: nothing was "
                          "applied; run the container with a rootful engine (sudo podman run ...), or without "
                          "gpuhook's tuning annotations")
    if gives:
        raise PolicyError(f"{engine}, which {gives} needs to give a container GPUs: nothing was applied; {WAY_OUT}")


def check_spec(spec: object, host_uid: int, gives: str) -> None:
    """check() for a config.json that `gives` would edit: refused where it asks gpuhook for anything (asks_gpus)."""
    spec = spec if isinstance(spec, dict) else {}
    annotations = spec.get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    process = spec.get("process")
    env = process.get("env") if isinstance(process, dict) else None
    env = [e for e in env if isinstance(e, str)] if isinstance(env, list) else []
    if asks_gpus(annotations, env):
        check(annotations, host_uid, gives, env)
