"""The Dask cluster only its owner can use; external schedulers by their own rules.

The embedded cluster speaks TLS with credentials made for the run: a client without
them (plain TCP, TLS without a certificate, another run's certificate) is refused,
while the owner's client runs tasks. An external ``tls://`` scheduler is reached with
the TLS settings of the Dask config; an unsupported scheme (``ucx://``) or a ``tls://``
address without credentials ends ``fleet`` with one line.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import dask
import pytest
from tracedata import DATA

from sofa_gui.core.fleet.engine import (
    EngineError,
    open_engine,
    run_ranks,
    start_private_cluster,
)
from sofa_gui.core.fleet.runset import rank_files

ROOT = Path(__file__).resolve().parents[2]


def _refused(address: str, security=None) -> bool:
    """Whether the scheduler or worker at ``address`` refuses to answer an ``identity``
    call from a client with ``security`` (None: no credentials)."""
    from distributed.comm import connect
    from distributed.security import Security

    async def identity():
        args = (security or Security()).get_connection_args("client")
        comm = await connect(address, timeout=5, **args)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            await comm.close()

    try:
        reply = asyncio.run(identity())
    except (OSError, TypeError, ValueError):
        return True
    return not isinstance(reply, dict)


def _tls_without_certificate(address: str) -> bool:
    """Whether a TLS handshake without a client certificate is refused."""
    host, port = address.removeprefix("tls://").rsplit(":", 1)
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw) as tls:
                tls.sendall(b"\0" * 64)
                return tls.recv(1) == b""  # the peer hung up
        except (ssl.SSLError, OSError):
            return True


def test_embedded_cluster_refuses_clients_without_its_credentials():
    from distributed.security import Security

    cluster, client = start_private_cluster(1)
    try:
        address = cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        assert client.submit(sum, [1, 2]).result(timeout=60) == 3
        assert not _refused(address, cluster.security)  # the owner's credentials
        assert _refused(address)
        assert _refused(address.replace("tls://", "tcp://"))
        assert _refused(address, security=Security.temporary())
        assert _tls_without_certificate(address)
        ports = [cluster.scheduler.http_server.port]
        for worker, info in client.scheduler_info()["workers"].items():
            assert worker.startswith("tls://")
            assert _refused(worker, security=Security.temporary())
            assert info["nanny"].startswith("tls://") and _refused(info["nanny"])
            assert _refused(info["nanny"], security=Security.temporary())
            ports.append(info["services"]["dashboard"])
        for port, path in itertools.product(ports, ["/status", "/info/main/workers.html",
                                                    "/metrics", "/json/identity.json"]):
            with pytest.raises(urllib.error.HTTPError, match="404"):
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
    finally:
        client.close()
        cluster.close()


def test_external_tls_scheduler_is_used_with_the_dask_config(tmp_path):
    from distributed import LocalCluster
    from distributed.security import Security

    security = Security.temporary()
    ca, cert, key = tmp_path / "ca.pem", tmp_path / "client.pem", tmp_path / "client.key"
    ca.write_text(security.tls_ca_file)
    cert.write_text(security.tls_client_cert)
    key.write_text(security.tls_client_key)
    key.chmod(0o600)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, host="127.0.0.1",
                      protocol="tls://", security=security, dashboard_address=None) as cluster:
        assert _refused(cluster.scheduler_address)
        tls = {"distributed.comm.tls.ca-file": str(ca),
               "distributed.comm.tls.client.cert": str(cert),
               "distributed.comm.tls.client.key": str(key)}
        with dask.config.set(tls), open_engine(cluster.scheduler_address) as engine:
            assert engine.embedded is False
            files = rank_files(DATA / "ranks")
            summaries = run_ranks(engine, files, use_cache=False)
    assert [s.error for s in summaries] == [None] * len(files)


def test_tls_scheduler_without_credentials_is_one_line():
    with pytest.raises(EngineError, match="no TLS credentials"):
        with open_engine("tls://127.0.0.1:9"):
            pass


@pytest.mark.parametrize("address, msg", [
    ("ucx://127.0.0.1:1234", "the ucx:// scheme is not supported"),
    ("inproc://somewhere", "the inproc:// scheme is not supported"),
    ("tls://127.0.0.1:9", "no TLS credentials"),
    ("tcp://[::1", "cannot reach Dask scheduler"),
])
def test_fleet_with_an_unusable_scheduler_prints_one_line(address, msg):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "sofa_gui", "fleet", str(DATA / "ranks"),
                           "--scheduler", address], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert proc.returncode == 2
    assert msg in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_fleet_on_the_embedded_cluster_prints_only_its_own_lines():
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "sofa_gui", "fleet", str(DATA / "ranks"),
                           "--workers", "1", "--no-cache", "--json"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["engine"]["scheduler"].startswith("tls://127.0.0.1:")
    assert all(line.startswith("rank ") for line in proc.stderr.strip().splitlines()), \
        proc.stderr
