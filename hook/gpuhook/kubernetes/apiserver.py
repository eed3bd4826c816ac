"""The Kubernetes API server, as the DRA driver talks to it: JSON over HTTPS with the standard library alone.

The driver needs a handful of calls (get a ResourceClaim, list, create, update and delete its node's
ResourceSlices), not a client library: the official `kubernetes` package costs ~1 s and ~100 MiB to import and
lightkube or kr8s bring httpx and their model packages for calls this module makes in ~150 lines
(docs/kubernetes.md has the measurements). Credentials come from the pod's service account (in cluster) or a
kubeconfig; the server's certificate is always verified against the cluster's CA.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
import threading
import urllib.parse

from gpuhook import fastjson
from gpuhook.configfile import read_regular
from gpuhook.errors import KubernetesError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_MAX_BODY = 16 << 20  # a list of a node's slices, or one claim, is far less
_MAX_FILE = 1 << 20


class ApiError(KubernetesError):
    """An answer other than 2xx: its HTTP status and the server's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ApiServer:
    """One API server: its address, the CA that signs it, and how we authenticate (a bearer token, re-read
    from its file on every call since projected tokens rotate, or a client certificate)."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, token_file: str = "", token: str = "",
                 timeout: float = 10.0) -> None:
        self._host, self._port, self._context = host, port, context
        self._token_file, self._token, self._timeout = token_file, token, timeout
        self._kept = threading.local()  # each thread's open connection, for its GETs (a TLS handshake spared)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                query: dict[str, str] | None = None, content_type: str = "application/json") -> dict[str, Any]:
        """One call; the answer's JSON object. ApiError for a non-2xx answer, KubernetesError when the server
        cannot be reached. Talks to the network."""
        url = path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Accept": "application/json", "User-Agent": "gpuhook"}
        token = self._bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        kept = getattr(self._kept, "conn", None) if method == "GET" else None
        for conn in ([kept] if kept else []) + [None]:  # a kept connection the server closed: once more, anew
            fresh = conn is None
            if conn is None:
                conn = http.client.HTTPSConnection(self._host, self._port, context=self._context,
                                                   timeout=self._timeout)
            try:
                conn.request(method, url, body=data, headers=headers)
                answer = conn.getresponse()
                raw = answer.read(_MAX_BODY + 1)
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                self._kept.conn = None
                if fresh:
                    raise KubernetesError(f"the API server https://{self._host}:{self._port} cannot be reached "
                                          f"({method} {path}): {e}") from e
                continue
            if method == "GET" and not answer.will_close:
                self._kept.conn = conn
            else:
                conn.close()
            break
        try:  # a pod author's opaque parameters may nest 10,000 deep: such subtrees are cut, the rest is read
            parsed = fastjson.loads_pruned(raw) if raw else {}
        except ValueError:
            parsed = {}
        if not 200 <= answer.status < 300:
            message = parsed.get("message") if isinstance(parsed, dict) else None
            raise ApiError(answer.status, f"{method} {path}: {answer.status} {message or answer.reason}")
        if len(raw) > _MAX_BODY or not isinstance(parsed, dict):
            raise KubernetesError(f"{method} {path}: the API server's answer is not a JSON object")
        return parsed

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        """GET `path`."""
        return self.request("GET", path, query=query)

    def _bearer(self) -> str:
        if self._token_file:
            return _read(self._token_file).strip()
        return self._token


def in_cluster(account: str = SERVICE_ACCOUNT, timeout: float = 10.0) -> ApiServer:
    """The API server of the cluster this pod runs in, with the service account in directory `account` (its
    token, re-read on every call, and the cluster's CA). KubernetesError outside one."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not os.path.exists(f"{account}/token"):
        raise KubernetesError(f"not in a Kubernetes pod (no KUBERNETES_SERVICE_HOST, or no token in {account}): "
                              "run as the DaemonSet does, or give --kubeconfig")
    context = ssl.create_default_context(cadata=_read(f"{account}/ca.crt"))
    return ApiServer(host.strip("[]"), int(port), context, token_file=f"{account}/token", timeout=timeout)


def from_kubeconfig(path: str, timeout: float = 10.0) -> ApiServer:
    """The API server and credentials of a kubeconfig's current context. The file is JSON (`kubectl config view
    --raw --flatten -o json` writes one; YAML is not read: the driver carries no YAML parser). KubernetesError."""
    try:
        doc = fastjson.loads(_read(path))
    except (OSError, ValueError) as e:
        raise KubernetesError(f"kubeconfig {path} cannot be read as JSON ({e}): write it with kubectl config view "
                              "--raw --flatten -o json") from e
    if not isinstance(doc, dict):
        raise KubernetesError(f"kubeconfig {path} is not a JSON object: write it with kubectl config view --raw "
                              "--flatten -o json")
    ctx = _field(_named(doc, "contexts", _text(doc, "current-context", path), path), "context", dict, path)
    cluster = _field(_named(doc, "clusters", _text(ctx, "cluster", path), path), "cluster", dict, path)
    user = _field(_named(doc, "users", _text(ctx, "user", path), path), "user", dict, path)
    server = urllib.parse.urlsplit(_text(cluster, "server", path))
    if server.scheme != "https" or not server.hostname:
        raise KubernetesError(f"kubeconfig {path}: the cluster's server {cluster.get('server')!r} is not https://")
    try:
        port = server.port or 443
    except ValueError as e:
        raise KubernetesError(f"kubeconfig {path}: the cluster's server has a bad port ({e})") from e
    context = ssl.create_default_context(cadata=_pem(cluster, "certificate-authority", path) or None)
    if user.get("client-certificate") or user.get("client-certificate-data"):
        _load_client_cert(context, _pem(user, "client-certificate", path), _pem(user, "client-key", path))
    return ApiServer(server.hostname, port, context, token_file=_text(user, "tokenFile", path),
                     token=_text(user, "token", path), timeout=timeout)


def _named(doc: dict[str, Any], section: str, name: str, path: str) -> dict[str, Any]:
    for item in _field(doc, section, list, path):
        if isinstance(item, dict) and item.get("name") == name:
            return item
    raise KubernetesError(f"kubeconfig {path} has no {section[:-1]} named {name!r}")


def _field(entry: dict[str, Any], key: str, kind: type, path: str) -> Any:
    """`entry[key]` when it is a `kind` (absent: an empty one); KubernetesError naming the key otherwise."""
    value = entry.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise KubernetesError(f"kubeconfig {path}: {key} is a JSON {type(value).__name__}, not the "
                              f"{'object' if kind is dict else 'list' if kind is list else 'string'} kubectl writes: "
                              "write it with kubectl config view --raw --flatten -o json")
    return value


def _text(entry: dict[str, Any], key: str, path: str) -> str:
    text: str = _field(entry, key, str, path)
    return text


def _pem(entry: dict[str, Any], key: str, path: str) -> str:
    """A PEM text given inline (`<key>-data`, base64) or as a file (`<key>`), else ""."""
    if data := _text(entry, f"{key}-data", path):
        try:
            return base64.b64decode(data, validate=True).decode()
        except ValueError as e:  # binascii.Error and UnicodeDecodeError are ValueErrors
            raise KubernetesError(f"kubeconfig {path}: {key}-data is not base64 of a PEM text ({e})") from e
    if name := _text(entry, key, path):
        return _read(name if os.path.isabs(name) else os.path.join(os.path.dirname(path), name))
    return ""


def _load_client_cert(context: ssl.SSLContext, cert: str, key: str) -> None:
    """ssl takes a client certificate only from files: a private one, removed at once."""
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(cert + "\n" + key)
        f.flush()
        context.load_cert_chain(f.name)


def _read(path: str) -> str:
    """A token, CA or kubeconfig: a regular file, read bounded and without blocking."""
    return read_regular(path, 0, _MAX_FILE).decode()
