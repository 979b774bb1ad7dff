"""An HTTPS image server on loopback for the image fetcher's tests, with a certificate made at test time.

A throwaway certificate authority (made with `cryptography`, in memory) signs a server certificate for `localhost`,
`images.test` and 127.0.0.1; the tests trust that authority through the fetcher's `ssl_context` seam, and nothing
else does. The server records what each request showed it (TLS server name, `Host`, path) and how many body bytes it
wrote, and serves the cases the fetcher must refuse: a redirect, an endless body, a slow one, text, a compressed
body, an error status.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from tempfile import TemporaryDirectory

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from testbed.images import png_bytes

PNG = png_bytes(width=8, height=8, rgb=(10, 120, 200))
NAMES = ("localhost", "images.test")
CHUNK = 16 << 10
SLOW_SECONDS = 5.0


@dataclass
class Seen:
    """What one request showed the server."""

    server_name: str | None
    host: str | None
    path: str


@dataclass
class ImageServer:
    port: int
    client_context: ssl.SSLContext
    """Trusts the test authority only: the fetcher's `ssl_context` seam."""
    seen: list[Seen] = field(default_factory=list)
    body_bytes_sent: dict[str, int] = field(default_factory=dict)

    def url(self, path: str, *, host: str = "localhost") -> str:
        return f"https://{host}:{self.port}{path}"


def _certificates() -> tuple[bytes, bytes, bytes]:
    """(the authority's certificate, the server's certificate, the server's key), PEM."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "openjev image fetch test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(name) for name in NAMES] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAMES[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(serialization.Encoding.PEM), leaf.public_bytes(serialization.Encoding.PEM), key_pem


def _handler(server: ImageServer, names: dict[int, str | None]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # a body without a length ends when the connection closes

        def log_message(self, format: str, *args: object) -> None:
            return

        def do_GET(self) -> None:
            server.seen.append(Seen(names.get(id(self.request)), self.headers.get("Host"), self.path))
            path = self.path.split("?", 1)[0]
            if path == "/logo.png":
                self._send(200, PNG, {"Content-Type": "image/png"})
            elif path == "/redirect":
                self._send(302, b"", {"Location": "/logo.png"})
            elif path == "/declared-huge":
                self._send(200, b"", {"Content-Type": "image/png", "Content-Length": str(10**9)}, length=False)
            elif path == "/endless":
                self._endless()
            elif path == "/slow":
                self._send(200, b"", {"Content-Type": "image/png", "Content-Length": "1000"}, length=False)
                self.wfile.write(PNG[:8])
                self.wfile.flush()
                time.sleep(SLOW_SECONDS)
            elif path == "/text":
                self._send(200, b"<html>not an image</html>", {"Content-Type": "text/html"})
            elif path == "/gzip":
                self._send(200, b"\x1f\x8b" + PNG, {"Content-Type": "image/png", "Content-Encoding": "gzip"})
            else:
                self._send(404, b"not found", {"Content-Type": "text/plain"})

        def _send(self, status: int, body: bytes, headers: dict[str, str], *, length: bool = True) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if length:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            server.body_bytes_sent[self.path] = len(body)

        def _endless(self) -> None:
            """A PNG's signature, then zeros until the client goes away (up to 64 MiB)."""
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            sent = 0
            chunk = PNG[:8] + bytes(CHUNK - 8)
            try:
                while sent < 64 << 20:
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    chunk = bytes(CHUNK)
            except OSError:
                pass
            server.body_bytes_sent[self.path] = sent

    return Handler


@contextmanager
def image_server() -> Iterator[ImageServer]:
    """The server on 127.0.0.1 (an ephemeral port), for the block."""
    ca_pem, cert_pem, key_pem = _certificates()
    with TemporaryDirectory() as folder:
        cert_file, key_file = Path(folder, "cert.pem"), Path(folder, "key.pem")
        cert_file.write_bytes(cert_pem)
        key_file.write_bytes(key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
    names: dict[int, str | None] = {}

    def sni(sock: ssl.SSLObject | ssl.SSLSocket, name: str | None, _: ssl.SSLContext) -> None:
        names[id(sock)] = name

    context.sni_callback = sni
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    httpd.daemon_threads = True
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    server = ImageServer(
        port=httpd.server_address[1], client_context=ssl.create_default_context(cadata=ca_pem.decode())
    )
    httpd.RequestHandlerClass = _handler(server, names)
    thread = threading.Thread(target=httpd.serve_forever, name="image-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
