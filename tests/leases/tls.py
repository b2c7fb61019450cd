"""TLS for the rediss:// tests: a throwaway CA and a certificate it signed, from
openssl; the server binary built with TLS (the suite's own, or Debian's
redis-server that ``make redis-tls`` installs); and a TLS-terminating proxy in
front of a plain server.

The proxy is a real TLS endpoint (handshake, certificate verification by the
client); behind it the bytes go to the plain server unchanged.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path

from celery_dgs.embedded import find_server_binary, free_port


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise FileNotFoundError("openssl")
    subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)


def make_certificate(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA, and a certificate it signed for localhost/127.0.0.1 with
    its key: ``(ca, cert, key)``. Raises ``FileNotFoundError`` without openssl."""
    ca, ca_key = directory / "ca.pem", directory / "ca-key.pem"
    cert, key, request = directory / "cert.pem", directory / "key.pem", directory / "cert.csr"
    extensions = directory / "cert.ext"
    # The extensions a strict verifier (Python 3.13's VERIFY_X509_STRICT) asks for.
    extensions.write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid:always\n"
    )
    ca_args = ["-keyout", str(ca_key), "-out", str(ca), "-subj", "/CN=celery-dgs test CA"]
    ca_extensions = [
        *("-addext", "basicConstraints=critical,CA:TRUE"),
        *("-addext", "keyUsage=critical,keyCertSign,cRLSign"),
        *("-addext", "subjectKeyIdentifier=hash"),
    ]
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *ca_args, *ca_extensions
    )
    request_args = ["-keyout", str(key), "-out", str(request), "-subj", "/CN=localhost"]
    _openssl("req", "-newkey", "rsa:2048", "-nodes", *request_args)
    signing = ["-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-days", "1"]
    _openssl(
        "x509",
        "-req",
        "-in",
        str(request),
        *signing,
        "-out",
        str(cert),
        "-extfile",
        str(extensions),
    )
    return ca, cert, key


#: Debian's redis-server (``make redis-tls`` installs it), built with TLS.
DEBIAN_REDIS_SERVER = Path(os.environ.get("DGS_TLS_REDIS_SERVER", "/usr/bin/redis-server"))


def server_has_tls(binary: Path) -> bool:
    """Whether the server ``binary`` was built with TLS."""
    probe = subprocess.run(
        [
            str(binary),
            "--port",
            "0",
            "--tls-port",
            str(free_port()),
            "--tls-cert-file",
            "/nonexistent",
            "--tls-key-file",
            "/nonexistent",
        ],
        capture_output=True,
        text=True,
        timeout=10,
    )
    output = probe.stdout + probe.stderr
    markers = ("Failed finding TLS support", "connection type tls", "Bad directive")
    return not any(marker in output for marker in markers)


def tls_server_binary() -> Path | None:
    """A server binary built with TLS: the suite's own, else Debian's
    redis-server (:data:`DEBIAN_REDIS_SERVER`); ``None`` when neither is."""
    for binary in (find_server_binary(), DEBIAN_REDIS_SERVER):
        if binary.is_file() and server_has_tls(binary):
            return binary
    return None


class TlsProxy:
    """Accept TLS on a loopback port; forward each connection to ``upstream_port``."""

    def __init__(self, upstream_port: int, cert: Path, key: Path) -> None:
        self.upstream_port = upstream_port
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(cert), str(key))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    def __enter__(self) -> TlsProxy:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.listener.close()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self._threads:
            thread.join(5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            try:
                client = self.context.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):
                raw.close()  # e.g. the client rejected our certificate
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._sockets += [client, upstream]
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
