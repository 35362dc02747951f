"""The test broker behind TLS: Python's ``ssl`` (OpenSSL) on the server side, writing the
sessions' secrets to an NSS key log (``SSLContext.keylog_filename``), so captures of
real clients over TLS come with the key log that decrypts them.

The certificates are made by :func:`write_certificates` (a CA, the server's RSA and
ECDSA certificates, a client certificate for mutual TLS) with pyca ``cryptography``.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from tests.broker.openssl import set_ciphersuites

SSL_OP_NO_ENCRYPT_THEN_MAC = 1 << 19  # OpenSSL's; Python's ssl has no name for it
VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
SERVER_NAME = "localhost"
# Files in a certificate folder.
CA, CLIENT_CERT, CLIENT_KEY = "ca.pem", "client.pem", "client.key"
SERVER_CHAINS = (("server-rsa.pem", "server-rsa.key"), ("server-ec.pem", "server-ec.key"))


@dataclass(frozen=True)
class TlsSettings:
    """How the broker speaks TLS (its command line: ``--tls-*``)."""

    certificates: Path  # a folder :func:`write_certificates` filled
    keylog: Path  # where the sessions' secrets go
    version: str | None = None  # "1.2" or "1.3" only; None: what the client prefers
    ciphers: str | None = None  # TLS 1.2 suites, an OpenSSL cipher string
    ciphersuites: str | None = None  # TLS 1.3 suites
    client_certificate: bool = False  # mutual TLS: a client certificate is required
    encrypt_then_mac: bool = True  # CBC suites: off means MAC-then-encrypt
    tickets: bool = True  # off: TLS 1.2 resumption by session id only
    key_update_every: int = 0  # frames written between two KeyUpdates (0: none)
    sessions: Path | None = None  # where each connection's TLS session is described

    def context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if self.version is not None:
            context.minimum_version = context.maximum_version = VERSIONS[self.version]
        for chain, key in SERVER_CHAINS:
            context.load_cert_chain(self.certificates / chain, self.certificates / key)
        if self.ciphers:
            context.set_ciphers(self.ciphers)
        if self.ciphersuites:
            set_ciphersuites(context, self.ciphersuites)
        if not self.encrypt_then_mac:
            context.options |= SSL_OP_NO_ENCRYPT_THEN_MAC
        if not self.tickets:
            context.options |= ssl.OP_NO_TICKET
        if self.client_certificate:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.certificates / CA)
        self.keylog.unlink(missing_ok=True)  # ssl appends: the secrets of this run alone
        context.keylog_filename = str(self.keylog)
        return context


def describe_session(connection: ssl.SSLObject, context: ssl.SSLContext) -> dict[str, object]:
    """What OpenSSL negotiated for one connection (the truth of the `tls_*` columns)."""
    name, _, _ = connection.cipher() or ("", "", 0)
    codes = {cipher["name"]: cipher["id"] & 0xFFFF for cipher in context.get_ciphers()}
    return {
        "version": connection.version(),
        "cipher": name,
        "cipher_id": codes.get(name),
        "client_cert": connection.getpeercert(binary_form=True) is not None,
        "resumed": connection.session_reused,
        "sni": connection.server_hostname,
    }


def write_certificates(folder: Path) -> Path:
    """A CA and the certificates it signs, for ``localhost`` and 127.0.0.1, valid now."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pwcap test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write(folder / CA, ca.public_bytes(serialization.Encoding.PEM))
    names = [x509.DNSName(SERVER_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    keys = (rsa.generate_private_key(65537, 2048), ec.generate_private_key(ec.SECP256R1()))
    for (chain, key_file), key in zip(SERVER_CHAINS, keys, strict=True):
        cert = _issue(ca, ca_key, key, SERVER_NAME, now, names)
        _write(folder / chain, cert.public_bytes(serialization.Encoding.PEM))
        _write(folder / key_file, _pem_key(key))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _issue(ca, ca_key, client_key, "pwcap-test-client", now, None)
    _write(folder / CLIENT_CERT, client.public_bytes(serialization.Encoding.PEM))
    _write(folder / CLIENT_KEY, _pem_key(client_key))
    return folder


def _issue(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    name: str,
    now: datetime.datetime,
    alternative: list[x509.GeneralName] | None,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
    )
    if alternative:
        builder = builder.add_extension(x509.SubjectAlternativeName(alternative), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _pem_key(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
