"""The API server client reads what a pod author wrote bounded (issue 43, 7): a ResourceClaim whose opaque
parameters nest 2,000 deep (the API server allows 10,000) is read with that subtree cut, not a RecursionError out
of NodePrepareResources or `upgrade plan`; a kubeconfig of the wrong shapes is one KubernetesError line."""

from __future__ import annotations

import http.client
import json
import os
import ssl
from pathlib import Path
from typing import Any

import pytest

from gpuhook import fastjson
from gpuhook.errors import KubernetesError
from gpuhook.kubernetes.apiserver import ApiServer, from_kubeconfig

DEEP = "[" * 2000 + "]" * 2000


class _Answer:
    def __init__(self, body: bytes, status: int = 200) -> None:
        self._body, self.status, self.reason, self.will_close = body, status, "OK", True

    def read(self, n: int) -> bytes:
        return self._body[:n]


def _server(monkeypatch: pytest.MonkeyPatch, body: bytes, status: int = 200) -> ApiServer:
    class Connection:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def request(self, *args: Any, **kwargs: Any) -> None:
            pass

        def getresponse(self) -> _Answer:
            return _Answer(body, status)

        def close(self) -> None:
            pass

    monkeypatch.setattr(http.client, "HTTPSConnection", Connection)
    return ApiServer("api.test", 443, ssl.create_default_context(), token="t")


def test_a_claim_list_holding_2000_deep_parameters_is_read_with_them_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = {"metadata": {"name": "deep", "namespace": "tenant"},
               "spec": {"devices": {"config": [{"opaque": {"driver": "x", "parameters": "@"}}]}},
               "status": {"reservedFor": [{"name": "pod-a"}]}}
    plain = {"metadata": {"name": "plain", "namespace": "other"}, "spec": {}}
    body = json.dumps({"kind": "ResourceClaimList", "items": [hostile, plain]}).replace('"@"', DEEP).encode()
    got = _server(monkeypatch, body).get("/apis/resource.k8s.io/v1/resourceclaims")
    assert [c["metadata"]["name"] for c in got["items"]] == ["deep", "plain"]
    assert got["items"][0]["status"]["reservedFor"] == [{"name": "pod-a"}]
    fastjson.check_depth(got)
    assert fastjson.PRUNED in json.dumps(got["items"][0]["spec"])


def test_an_error_answer_that_nests_deep_is_still_the_api_error(monkeypatch: pytest.MonkeyPatch) -> None:
    body = ('{"message": "denied", "details": ' + DEEP + "}").encode()
    with pytest.raises(KubernetesError, match="403 denied"):
        _server(monkeypatch, body, 403).get("/api/v1/pods")


def _kubeconfig(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def _config(cluster: object = None, user: object = None, context: object = None) -> dict[str, Any]:
    return {"current-context": "c",
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"} if context is None else context}],
            "clusters": [{"name": "k", "cluster": {"server": "https://api.test:6443"} if cluster is None else cluster}],
            "users": [{"name": "u", "user": {"token": "t"} if user is None else user}]}


@pytest.mark.parametrize(("doc", "says"), [
    ([], "is not a JSON object"),
    ({"current-context": 7}, "current-context is a JSON int"),
    ({**_config(), "contexts": "c"}, "contexts is a JSON str"),
    (_config(context="k"), "context is a JSON str"),
    (_config(context={"cluster": ["k"], "user": "u"}), "cluster is a JSON list"),
    (_config(cluster={"server": 6443}), "server is a JSON int"),
    (_config(cluster={"server": "https://api.test:99999"}), "bad port"),
    (_config(user={"token": ["t"]}), "token is a JSON list"),
    (_config(cluster={"server": "https://api.test", "certificate-authority-data": "%%%"}), "is not base64"),
    (_config(cluster={"server": "https://api.test", "certificate-authority-data": {"a": 1}}),
     "certificate-authority-data is a JSON dict"),
    ('{"contexts": ' + DEEP + "}", "nests deeper than 64 levels"),
    ("{", "cannot be read as JSON"),
], ids=["a-list", "context-name-a-number", "contexts-a-string", "context-a-string", "cluster-name-a-list",
        "server-a-number", "port-out-of-range", "token-a-list", "ca-not-base64", "ca-an-object", "deep", "broken"])
def test_a_kubeconfig_of_the_wrong_shapes_is_one_line(tmp_path: Path, doc: object, says: str) -> None:
    with pytest.raises(KubernetesError, match="kubeconfig") as e:
        from_kubeconfig(_kubeconfig(tmp_path, doc))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_fifo_kubeconfig_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "kubeconfig")
    with pytest.raises(KubernetesError, match="not a regular file"):
        from_kubeconfig(str(tmp_path / "kubeconfig"))


def test_a_good_kubeconfig_still_reads(tmp_path: Path) -> None:
    server = from_kubeconfig(_kubeconfig(tmp_path, _config()))
    assert server._host == "api.test" and server._port == 6443 and server._token == "t"
