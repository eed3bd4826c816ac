"""`gpuhook exporter`'s ways out: HTTP (/metrics through prometheus_client's server), the textfile (atomic,
parsed back with prometheus_client's parser) and one scrape on stdout; the listen address; health changes logged."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gpuhook.config import Config, Exporter
from gpuhook.errors import ConfigError
from gpuhook.metrics import exporter

from ...conftest import FakeHost

LISTEN = [("ipv4", "127.0.0.1:9835", ("127.0.0.1", 9835)), ("ipv6", "[::1]:9400", ("::1", 9400)),
          ("every address", ":9835", ("0.0.0.0", 9835)), ("a name", "localhost:1", ("localhost", 1))]


@pytest.mark.parametrize(("text", "parsed"), [a[1:] for a in LISTEN], ids=[a[0] for a in LISTEN])
def test_listen_addresses(text: str, parsed: tuple[str, int]) -> None:
    assert exporter.parse_listen(text) == parsed


@pytest.mark.parametrize("text", ["9835", "host:", "host:0", "host:65536", "host:http"])
def test_bad_listen_addresses_are_one_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="is not host:port"):
        exporter.parse_listen(text)


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_textfile_once_is_written_atomically_and_parses(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=2)
    config = Config(path="/c", host_root=host, state_dir=str(tmp_path / "state"), exporter=Exporter(telemetry=False))
    out = tmp_path / "textfile"
    assert exporter.run(config, textfile_dir=str(out), once=True) == 0
    assert [p.name for p in out.iterdir()] == ["gpuhook.prom"]  # no temporary file left beside it
    assert oct((out / "gpuhook.prom").stat().st_mode & 0o777) == "0o644"
    got = _samples((out / "gpuhook.prom").read_text())
    assert len(got["gpuhook_gpu_info"]) == 2 and [v for _, v in got["gpuhook_gpu_healthy"]] == [1.0, 1.0]
    assert "gpuhook_gpu_power_watts" not in got  # telemetry = false: gpuhook's own metrics only
    assert not (tmp_path / "state").exists()


def test_http_serves_metrics_until_stopped(fake_host: FakeHost, tmp_path: Path) -> None:
    host = fake_host(nvidia=1)
    registry = CollectorRegistry(auto_describe=False)
    collector = exporter.Collector(Config(path="/c", host_root=host, state_dir=str(tmp_path / "state")))
    registry.register(collector)
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stop = threading.Event()
    server = threading.Thread(target=exporter._serve, args=(registry, f"127.0.0.1:{port}", stop))
    server.start()
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    kind, text = r.headers["Content-Type"], r.read().decode()
                break
            except urllib.error.URLError:
                stop.wait(0.05)
        assert kind.startswith("text/plain; version=0.0.4")
        got = _samples(text)
        assert got["gpuhook_gpu_power_watts"][0][1] == 72.0 and got["gpuhook_ledger_ok"] == [({}, 1.0)]
    finally:
        stop.set()
        server.join(10)
        collector.close()
    assert not server.is_alive()


def test_health_changes_are_logged_once(fake_host: FakeHost, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    host = fake_host(nvidia=2)
    collector = exporter.Collector(Config(path="/c", host_root=host, state_dir=str(tmp_path / "s"),
                                          exporter=Exporter(telemetry=False)))
    list(collector.collect())
    assert capsys.readouterr().err == ""  # healthy from the start: nothing to say
    Path(host + "/dev/nvidia1").unlink()
    list(collector.collect())
    list(collector.collect())
    err = capsys.readouterr().err.splitlines()
    assert err == ["gpuhook exporter: nvidia GPU GPU-00000001-5a1e-4000-8000-0000d00d0001: unhealthy: device node "
                   "/dev/nvidia1 is missing"]
