"""CRI-O: a drop-in crio.conf.d/99-gpuhook.toml with the gpuhook runtime. CRI-O puts every pod and container
annotation into the OCI spec (its allowed_annotations are for its own experimental keys only: a handler naming any
other is ignored, whole), so gpuhook.dev/ keys need no listing; that a pod's annotation cannot pose as the
device plugin's allocation is checked at create (request/container.py). CRI-O has CDI on by default
(cdi_spec_dirs /etc/cdi, /var/run/cdi). A config other than the default one is
named in the runtime's environment (monitor_env: CRI-O gives conmon, and so the runtime, that environment alone)."""

from __future__ import annotations

from gpuhook.configfile import DEFAULT_PATH
from gpuhook.engines.wanted import Wanted


def render(wanted: Wanted) -> str:
    """The drop-in's text."""
    default = '[crio.runtime]\ndefault_runtime = "gpuhook"\n\n' if wanted.set_default else ""
    return ("# Written by `gpuhook configure crio`; `gpuhook configure crio --revert` removes it.\n" + default +
            "[crio.runtime.runtimes.gpuhook]\n"
            f'runtime_path = "{wanted.shim}"\n'
            'runtime_type = "oci"\n' +
            (f'monitor_env = ["PATH={_PATH}", "GPUHOOK_CONFIG={wanted.config}"]\n'
             if wanted.config and wanted.config != DEFAULT_PATH else ""))


def ignored(path: str, text: bytes) -> tuple[str, str] | None:
    """(what, fix) where the drop-in at `path` lists gpuhook.dev/ keys in allowed_annotations (an earlier gpuhook
    wrote them), which makes CRI-O ignore the whole handler; None otherwise. Pure."""
    if b"allowed_annotations" in text and b"gpuhook.dev/" in text:
        return (f"{path} lists gpuhook.dev/ keys in allowed_annotations (written by an earlier gpuhook): CRI-O takes "
                "only its own keys there and ignores the whole gpuhook handler", "gpuhook configure crio, then restart "
                "CRI-O")
    return None


_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # CRI-O's own default monitor_env
