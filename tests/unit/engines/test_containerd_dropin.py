"""gpuhook configure containerd's drop-in: what the drop-in holds, the one imports edit to config.toml (idempotent,
reverted to the same bytes), the files configure and --revert write, and the CLI's choice of drop-in or in place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomlkit

from gpuhook.cli import admin as cli
from gpuhook.engines.containerd_dropin import MARK, covered, default_path, plan, record_of, undo
from gpuhook.engines.files import SUFFIX, configure, configure_drop_in, revert_drop_in
from gpuhook.engines.wanted import Wanted
from gpuhook.errors import EngineConfigError

W = Wanted(shim="/opt/gpuhook/bin/gpuhook-runtime", gpuhook="/opt/gpuhook/bin/gpuhook", config="/etc/gpuhook/x.toml")
MAIN, DROP = "/etc/containerd/config.toml", "/etc/containerd/conf.d/99-gpuhook.toml"
LINE = f'imports = ["/etc/containerd/conf.d/*.toml"]  {MARK}\n'

V2 = """# kubeadm's containerd
version = 2
root = "/var/lib/containerd"  # keep this comment

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true

[plugins."io.containerd.internal.v1.opt"]
  path = "/opt/containerd"
"""
V3 = """version = 3
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "registry.k8s.io/pause:3.10"
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
"""
V3_IMPORTS = 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n'  # containerd 2.2's `config default` has it


def _runtimes(text: str, plugin: str) -> Any:
    return tomlkit.parse(text)["plugins"][plugin]["containerd"]["runtimes"]


@pytest.mark.parametrize(("main", "plugin", "kept"), [
    (V2, "io.containerd.grpc.v1.cri", ("runc", "sandbox_image")),
    (V3, "io.containerd.cri.v1.runtime", ()),
], ids=["version 2 (containerd 1.x)", "version 3 (containerd 2)"])
def test_drop_in_holds_the_cri_section_and_the_gpuhook_runtime(main: str, plugin: str, kept: tuple[str, ...]) -> None:
    _, drop_in = plan(main, MAIN, DROP, W, None)
    doc = tomlkit.parse(drop_in)
    assert doc["version"] == tomlkit.parse(main)["version"] and "imports" not in doc
    gpuhook = _runtimes(drop_in, plugin)["gpuhook"]
    assert gpuhook["runtime_type"] == "io.containerd.runc.v2" and gpuhook["options"]["BinaryName"] == W.shim
    assert gpuhook["container_annotations"] == ["gpuhook.dev/allocation"]
    section = doc["plugins"][plugin]
    assert section["containerd"]["default_runtime_name"] == "runc"  # the section's own settings, copied
    assert all(k in section or k in section["containerd"]["runtimes"] for k in kept)
    assert set(doc["plugins"]) == {plugin}  # other plugins (images, opt) are not copied: containerd keeps them
    assert record_of(drop_in) == "line"


def test_cdi_and_default_runtime_go_into_the_drop_in() -> None:
    wanted = Wanted(shim=W.shim, gpuhook=W.gpuhook, config=W.config, set_default=True, cdi=True)
    new_main, drop_in = plan(V2, MAIN, DROP, wanted, None)
    cri = tomlkit.parse(drop_in)["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["enable_cdi"] is True and cri["containerd"]["default_runtime_name"] == "gpuhook"
    assert "enable_cdi" not in new_main and new_main.count("gpuhook") == 1  # only the imports line


@pytest.mark.parametrize(("main", "record", "expected"), [
    (V2, "line", V2.replace("version = 2\n", "version = 2\n" + LINE)),
    (V3, "line", "version = 3\n" + LINE + V3.split("\n", 1)[1]),
    (V3_IMPORTS, "none", V3_IMPORTS),
    ('version = 2\nimports = ["conf.d/*.toml"]\n', "none", 'version = 2\nimports = ["conf.d/*.toml"]\n'),
    ('version = 2\nimports = ["/etc/containerd/runtime_*.toml"]  # mine\n', "appended /etc/containerd/conf.d/*.toml",
     'version = 2\nimports = ["/etc/containerd/runtime_*.toml", "/etc/containerd/conf.d/*.toml"]  # mine\n'),
    ("", "line", f"version = 2  {MARK}\n{LINE}"),
    ('# no version: containerd 1.x reads it as version 1\n', "", ""),
], ids=["adds the line after version", "version 3", "imports it already", "relative import", "other imports",
        "empty file", "version 1 refused"])
def test_the_one_imports_edit(main: str, record: str, expected: str) -> None:
    if not record:
        with pytest.raises(EngineConfigError, match="version 1, which gpuhook does not register with: `containerd "
                           "config migrate` converts it"):
            plan(main, MAIN, DROP, W, None)
        return
    new_main, drop_in = plan(main, MAIN, DROP, W, None)
    assert new_main == expected and record_of(drop_in) == record
    assert tomlkit.parse(new_main)  # still TOML: one imports key
    assert undo(new_main, drop_in) == main  # revert: the same bytes
    assert plan(new_main, MAIN, DROP, W, drop_in) == (new_main, drop_in)  # idempotent, the record kept


def test_an_absent_config_is_created_and_removed_again() -> None:
    new_main, drop_in = plan(None, MAIN, DROP, W, None)
    assert new_main == f"version = 2  {MARK}\n{LINE}" and record_of(drop_in) == "created"
    assert undo(new_main, drop_in) is None
    assert undo(new_main + 'root = "/srv"\n', drop_in) == 'root = "/srv"\n'  # what the admin wrote since stays


@pytest.mark.parametrize(("imports", "yes"), [
    (["/etc/containerd/conf.d/*.toml"], True), (["conf.d/*.toml"], True), (["/etc/containerd/conf.d/99-*.toml"], True),
    (["/etc/containerd/*.toml"], False), (["/etc/containerd/*/*.toml"], True), (["/etc/other/conf.d/*.toml"], False),
    ("not a list", False),
], ids=["absolute", "relative", "prefix glob", "one level up", "glob directory", "elsewhere", "not a list"])
def test_covered(imports: object, yes: bool) -> None:
    assert covered(imports, MAIN, DROP) is yes


def test_files_configure_is_idempotent_and_revert_exact(tmp_path: Path) -> None:
    main, drop = tmp_path / "config.toml", tmp_path / "conf.d" / "99-gpuhook.toml"
    main.write_text(V2)
    first = configure_drop_in("containerd", str(main), str(drop), W)
    assert first.changed and "added the imports line to" in first.next_step and drop.is_file()
    again = configure_drop_in("containerd", str(main), str(drop), W)
    assert not again.changed and "nothing to do" in again.next_step
    back = revert_drop_in("containerd", str(main), str(drop))
    assert back.changed and "took gpuhook's imports line out" in back.next_step
    assert main.read_bytes() == V2.encode() and not drop.exists()
    assert not revert_drop_in("containerd", str(main), str(drop)).changed  # nothing left to revert


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    main, drop = tmp_path / "config.toml", tmp_path / "conf.d" / "99-gpuhook.toml"
    main.write_text(V3)
    outcome = configure_drop_in("containerd", str(main), str(drop), W, dry_run=True)
    assert "+imports = [" in outcome.diff and "dry run" in outcome.next_step
    assert main.read_text() == V3 and not drop.exists()


def test_revert_leaves_a_file_gpuhook_did_not_write(tmp_path: Path) -> None:
    main, drop = tmp_path / "config.toml", tmp_path / "99-nvidia.toml"
    main.write_text(V2)
    drop.write_text("version = 2\n")
    with pytest.raises(EngineConfigError, match="was not written by gpuhook configure: left alone"):
        revert_drop_in("containerd", str(main), str(drop))
    assert drop.read_text() == "version = 2\n"


def test_revert_also_undoes_an_earlier_in_place_registration(tmp_path: Path) -> None:
    main, drop = tmp_path / "config.toml", tmp_path / "conf.d" / "99-gpuhook.toml"
    main.write_text(V2)
    configure("containerd", str(main), W)  # an older gpuhook's registration, in config.toml itself
    configure_drop_in("containerd", str(main), str(drop), W)  # the upgrade's
    outcome = revert_drop_in("containerd", str(main), str(drop))
    assert "as it was before an earlier in-place registration" in outcome.next_step
    assert main.read_text() == V2 and not drop.exists() and not Path(str(main) + SUFFIX).exists()
    configure("containerd", str(main), W)  # in place only (an older gpuhook), reverted by a newer one's --revert
    assert revert_drop_in("containerd", str(main), str(drop)).changed and main.read_text() == V2


def test_cli_writes_a_drop_in_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main = tmp_path / "config.toml"
    main.write_text(V2)
    assert cli.main(["configure", "containerd", "--config-path", str(main)]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith(f"changed {tmp_path}/conf.d/99-gpuhook.toml: added the imports line to {main}")
    assert main.read_text().count("gpuhook") == 1
    assert "gpuhook-runtime" in (tmp_path / "conf.d/99-gpuhook.toml").read_text()
    assert default_path(str(main)) == f"{tmp_path}/conf.d/99-gpuhook.toml"
    assert cli.main(["configure", "containerd", "--config-path", str(main), "--revert"]) == 0
    assert main.read_text() == V2 and not (tmp_path / "conf.d/99-gpuhook.toml").exists()


def test_cli_drop_in_path_and_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main, drop = tmp_path / "config.toml", tmp_path / "d" / "50-gpu.toml"
    main.write_text(V3)
    assert cli.main(["configure", "containerd", "--config-path", str(main), "--drop-in", str(drop)]) == 0
    assert drop.is_file() and f'imports = ["{tmp_path}/d/*.toml"]' in main.read_text()
    assert cli.main(["configure", "containerd", "--config-path", str(main), "--drop-in", str(drop), "--revert"]) == 0
    assert main.read_text() == V3 and not drop.exists()
    assert cli.main(["configure", "containerd", "--config-path", str(main), "--in-place"]) == 0
    assert "runtimes.gpuhook" in main.read_text() and not (tmp_path / "conf.d").exists()
    assert cli.main(["configure", "containerd", "--config-path", str(main), "--in-place", "--revert"]) == 0
    assert main.read_text() == V3
    capsys.readouterr()
    assert cli.main(["configure", "containerd", "--config-path", str(main), "--in-place", "--drop-in", "x"]) != 0
    assert f"--drop-in x with --in-place, which edits {main} itself: give one of the two" in capsys.readouterr().err


def test_cli_edits_a_k3s_template_in_place(tmp_path: Path) -> None:
    template = tmp_path / "config-v3.toml.tmpl"
    assert cli.main(["configure", "containerd", "--config-path", str(template)]) == 0
    assert "# BEGIN gpuhook" in template.read_text() and not (tmp_path / "conf.d").exists()


def test_crio_takes_no_drop_in_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["configure", "crio", "--config-path", str(tmp_path / "99.toml"), "--drop-in", "x"]) != 0
    err = capsys.readouterr().err
    assert "CRI-O takes no drop-in from gpuhook" in err and "run it without --drop-in" in err


@pytest.mark.parametrize(("edit", "level", "says"), [
    (None, "ok", "gpuhook registered by the drop-in {drop}, which {main} imports"),
    ("lose the imports line", "fail", "{drop} registers gpuhook but {main} does not import it"),
    ("in place", "ok", "gpuhook registered in place in {main}"),
    ("reverted", "warn", "its containers cannot get GPUs: gpuhook is not registered in {main}"),
], ids=["drop-in", "not imported", "in place", "reverted"])
def test_doctor_says_how_containerd_is_registered(tmp_path: Path, edit: str | None, level: str, says: str) -> None:
    from gpuhook.cli.doctor_engines import report
    from gpuhook.engines.files import revert
    from gpuhook.engines.table import CONTAINERD

    main, drop = tmp_path / "config.toml", tmp_path / "conf.d" / "99-gpuhook.toml"
    main.write_text(V2)
    configure_drop_in("containerd", str(main), str(drop), W)
    if edit == "lose the imports line":
        main.write_text(V2)
    elif edit == "in place":
        revert_drop_in("containerd", str(main), str(drop))
        configure("containerd", str(main), W)
    elif edit == "reverted":
        revert_drop_in("containerd", str(main), str(drop))
        revert("containerd", str(main))
    (found,) = report(CONTAINERD, str(main), None, "1.6.20", specs=False)
    assert found[0] == level and found[1].startswith("containerd 1.6.20: reads no CDI specs (from containerd 1.7); ")
    assert says.format(drop=drop, main=main) in found[1]
    assert (found[2:] == ("gpuhook configure containerd, then restart containerd",)) is (level != "ok")
