"""k3s's and RKE2's containerd templates against the containerd they template: `gpuhook configure containerd` writes
its block into config.toml.tmpl (containerd 1.x, config version 2; Debian's 1.6 here) or config-v3.toml.tmpl
(containerd 2.x, version 3; 2.4.2 from tools/components), the template is rendered as those distributions render it
(Go's text/template, their own config as the template "base": tools/components/gotemplate), and that containerd runs
on the result: a pod on the gpuhook handler gets the GPU it asked for, one on runc none."""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook.engines.containerd_template import BASE, BEGIN, END
from gpuhook.engines.files import configure, revert
from gpuhook.engines.wanted import Wanted
from tests.e2e import conftest as e2e
from tests.e2e.cri_env import start

from .node import components

SEE = "ls /dev | grep -E '^nvidia[0-9]+$' || true"


def _through_template(d: Path, distribution: str, name: str, rendered: list[str]) -> Callable[[str, Wanted], str]:
    """A registration that goes the distribution's way: gpuhook's block in a new template, rendered over containerd's
    config as it was before gpuhook (the distribution's own, here cri_env's)."""
    def register(base: str, wanted: Wanted) -> str:
        template = d / f"var/lib/rancher/{distribution}/agent/etc/containerd" / name
        outcome = configure("containerd", str(template), wanted)
        assert outcome.changed and f"restart {distribution}" in outcome.next_step, outcome
        (d / "base.tmpl").write_text(base)
        done = subprocess.run([str(components() / "gotemplate"), str(d / "base.tmpl"), str(template)],
                              capture_output=True, text=True, check=False, timeout=30)
        assert done.returncode == 0, done.stderr
        rendered.append(template.read_text())
        return done.stdout
    return register


@pytest.mark.parametrize(("distribution", "name", "containerd", "plugin"), [
    ("k3s", "config.toml.tmpl", "containerd", "io.containerd.grpc.v1.cri"),
    ("rke2", "config-v3.toml.tmpl", "built", "io.containerd.cri.v1.runtime"),
], ids=["k3s-containerd-1.6", "rke2-containerd-2"])
def test_a_rendered_template_serves_gpus(tmp_path: Path, base_rootfs: str, distribution: str, name: str,
                                         containerd: str, plugin: str) -> None:
    binary = str(components() / "containerd") if containerd == "built" else containerd
    templates: list[str] = []
    with start(tmp_path / "cri", base_rootfs, e2e.SHIM, e2e.GPUHOOK, containerd=binary,
               registration=_through_template(tmp_path, distribution, name, templates)) as env:
        template, = templates
        assert template.startswith(BASE + "\n\n" + BEGIN) and template.endswith(END + "\n"), template
        runtimes = tomllib.loads(env.config_text)["plugins"][plugin]["containerd"]["runtimes"]
        assert set(runtimes) == {"runc", "gpuhook"}, runtimes
        asked = env.run_to_completion(SEE, handler="gpuhook",
                                      pod_annotations={"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"})
        assert asked.exit_code == 0 and asked.output.split() == ["nvidia1"], f"{asked.output!r}\n{env.log_tail()}"
        plain = env.run_to_completion(SEE, handler="runc",
                                      pod_annotations={"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"})
        assert plain.exit_code == 0 and plain.output.split() == [], f"{plain.output!r}\n{env.log_tail()}"
    path = tmp_path / f"var/lib/rancher/{distribution}/agent/etc/containerd" / name
    revert("containerd", str(path))
    assert not path.exists()
