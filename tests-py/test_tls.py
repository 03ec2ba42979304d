"""rediss:// with a private CA: `connect(..., tls_ca_cert=...)` against a TLS-only redis-server."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

import crosslock
from support import REDIS_CLI, REDIS_SERVER, free_port, reap_at_exit


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def tls_server(tmp_path: Path):
    """A redis-server listening only with TLS, its certificate signed by a throwaway CA."""
    _openssl(tmp_path, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=crosslock test CA", "-keyout", "ca-key.pem", "-out", "ca.pem")
    _openssl(tmp_path, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "key.pem", "-out", "server.csr")
    (tmp_path / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl(tmp_path, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
             "-CAcreateserial", "-days", "1", "-extfile", "san.ext", "-out", "cert.pem")
    port = free_port()
    proc = subprocess.Popen(
        [REDIS_SERVER, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", "cert.pem", "--tls-key-file", "key.pem", "--tls-auth-clients", "no",
         "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    reap_at_exit(proc.pid, "-")  # its directory is pytest's tmp_path
    try:
        deadline = time.monotonic() + 10
        while subprocess.run([REDIS_CLI, "--tls", "--cacert", "ca.pem", "-p", str(port), "ping"],
                             cwd=tmp_path, capture_output=True, text=True).stdout.strip() != "PONG":
            assert time.monotonic() < deadline, "TLS redis-server did not start"
            time.sleep(0.05)
        yield f"rediss://127.0.0.1:{port}/0", tmp_path / "ca.pem"
    finally:
        proc.kill()
        proc.wait(5)


def test_lock_over_tls_with_a_private_ca_given_as_a_path(tls_server) -> None:
    url, ca = tls_server
    with crosslock.connect(url, tls_ca_cert=str(ca)) as client:
        lock = client.lock("tls:orders")
        with lock:
            assert lock.is_held() and lock.hold_count() == 1
        assert not lock.locked()


async def test_lock_over_tls_with_a_private_ca_given_as_bytes(tls_server) -> None:
    url, ca = tls_server
    client = await crosslock.connect_async(url, tls_ca_cert=ca.read_bytes())
    try:
        async with client.lock("tls:async"):
            pass
    finally:
        await client.aclose()


def test_untrusted_server_certificate_is_refused(tls_server) -> None:
    url, _ = tls_server
    with pytest.raises(crosslock.RedisUnavailableError) as caught:
        crosslock.connect(url, connect_timeout=1.0)
    assert "(TLS)" in str(caught.value)


def test_unreadable_or_mistyped_ca_is_an_invalid_argument(tmp_path: Path) -> None:
    with pytest.raises(crosslock.InvalidArgumentError, match="TLS CA certificate"):
        crosslock.connect("rediss://127.0.0.1:1/0", tls_ca_cert=str(tmp_path / "missing.pem"))
    with pytest.raises(TypeError):
        crosslock.connect("rediss://127.0.0.1:1/0", tls_ca_cert=42)  # type: ignore[arg-type]
