"""CRI-O: a drop-in crio.conf.d/99-gpuhook.toml with the gpuhook runtime and its allowed annotations: every
gpuhook.dev/ key by name, the allocation key (which the kubelet sets from the device plugin's answer) among
them. CRI-O has CDI on by default (cdi_spec_dirs /etc/cdi, /var/run/cdi)."""

from __future__ import annotations

from gpuhook.engines.wanted import Wanted
from gpuhook.request.container import ALLOCATION, PREFIX, pod_keys


def render(wanted: Wanted) -> str:
    """The drop-in's text."""
    default = '[crio.runtime]\ndefault_runtime = "gpuhook"\n\n' if wanted.set_default else ""
    return ("# Written by `gpuhook configure crio`; `gpuhook configure crio --revert` removes it.\n" + default +
            "[crio.runtime.runtimes.gpuhook]\n"
            f'runtime_path = "{wanted.shim}"\n'
            'runtime_type = "oci"\n'
            "allowed_annotations = [" + ", ".join(f'"{PREFIX}{k}"' for k in (*pod_keys(), ALLOCATION)) + "]\n")
