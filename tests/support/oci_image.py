"""OCI image layout archives from a directory, for `ctr images import`: one layer, a config, a manifest and an
index naming the image. Only tarfile, gzip and hashlib: no registry, no docker, nothing to pull."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Mapping, Sequence
from typing import Any

from gpuhook.frozen import frozen

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"
LAYER_GZIP = LAYER + "+gzip"
# ctr (1.6) names an imported image by io.containerd.image.name, else by org.opencontainers.image.ref.name when that
# is a full reference; a bare tag there becomes `import-<date>:<tag>` unless `--base-name` is given. Both carry the
# full name here, so no flag is needed.
REF_NAME = "org.opencontainers.image.ref.name"
IMAGE_NAME = "io.containerd.image.name"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@frozen
class Image:
    """What an archive holds: the image's full name and the digests it was written with."""

    name: str
    manifest_digest: str
    config_digest: str
    diff_id: str


def layer_tar(rootfs: str) -> bytes:
    """An uncompressed tar of `rootfs`'s contents (paths relative, sorted, owners and modes kept, mtime 0)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _walk(rootfs):
            rel = os.path.relpath(path, rootfs)
            info = tar.gettarinfo(path, arcname=rel)
            info.mtime = 0
            info.uname = info.gname = ""
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def _walk(top: str) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        out += [os.path.join(dirpath, d) for d in dirnames]
        out += [os.path.join(dirpath, f) for f in sorted(filenames)]
    return out


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def write_archive(rootfs: str, out: str, name: str, *, entrypoint: Sequence[str] = (),
                  cmd: Sequence[str] = (), env: Mapping[str, str] | None = None, working_dir: str = "/",
                  gzip_layer: bool = True, labels: Mapping[str, str] | None = None) -> Image:
    """Write the OCI layout tarball `out` of a one-layer linux/amd64 image of `rootfs`, named `name` (a full
    reference, `gpuhook.test/base:1`) in both io.containerd.image.name and org.opencontainers.image.ref.name."""
    raw = layer_tar(rootfs)
    diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()
    layer = gzip.compress(raw, mtime=0) if gzip_layer else raw
    layer_digest, _ = _blob(layer)
    env_list = [DEFAULT_PATH] if env is None else [f"{k}={v}" for k, v in env.items()]
    image_config: dict[str, Any] = {"Env": env_list, "WorkingDir": working_dir}
    if entrypoint:
        image_config["Entrypoint"] = list(entrypoint)
    if cmd:
        image_config["Cmd"] = list(cmd)
    if labels:
        image_config["Labels"] = dict(labels)
    config_digest, config = _blob(_json({
        "architecture": "amd64", "os": "linux", "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "gpuhook.testing.oci_image"}],
    }))
    manifest_digest, manifest = _blob(_json({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": LAYER_GZIP if gzip_layer else LAYER, "digest": layer_digest, "size": len(layer)}],
    }))
    index = _json({
        "schemaVersion": 2, "mediaType": INDEX,
        "manifests": [{"mediaType": MANIFEST, "digest": manifest_digest, "size": len(manifest),
                       "platform": {"architecture": "amd64", "os": "linux"},
                       "annotations": {IMAGE_NAME: name, REF_NAME: name}}],
    })
    files = [("oci-layout", _json({"imageLayoutVersion": "1.0.0"})), ("index.json", index)]
    files += [(f"blobs/sha256/{d.split(':', 1)[1]}", data)
              for d, data in ((config_digest, config), (manifest_digest, manifest), (layer_digest, layer))]
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for dirname in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(dirname)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, data in files:
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return Image(name, manifest_digest, config_digest, diff_id)


def _json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
