"""Certificates for the local broker's TLS listeners: a private CA made per instance, and one broker
certificate for 127.0.0.1 and localhost signed by it.

Everything is PEM, which Kafka reads directly (ssl.keystore.type=PEM) and Python's ssl module
trusts as a CA file. Private keys are written unencrypted with mode 0600; the CA key is not kept
at all once the broker certificate is signed, so nobody can mint another certificate the broker
would trust for its controller listener.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The broker certificate's subject; with client authentication on the controller listener the
# broker presents it to itself, and Kafka names that principal "User:" + this DN.
BROKER_DN = "CN=podledger-local-broker,O=podledger"
VALID_DAYS = 30


@dataclass(frozen=True, slots=True)
class BrokerCerts:
    ca: str  # the CA certificate: the truststore of the broker and of every client
    keystore: str  # the broker's private key followed by its certificate chain
    principal: str  # the Kafka principal of the broker certificate (for super.users)


def write_private(path: Path, data: bytes) -> None:
    """Create (or replace) a file only its owner can read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "podledger"),
        ]
    )


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_broker_certs(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> BrokerCerts:
    """A new CA and a broker certificate for `hosts` (IP addresses or DNS names), in `directory`."""
    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("podledger-local-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
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
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name.from_rfc4514_string(BROKER_DN))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        # The broker is a TLS server to clients and, on the controller listener, a client of itself.
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    directory.mkdir(parents=True, exist_ok=True)
    ca_path, keystore_path = directory / "ca.pem", directory / "broker.pem"
    write_private(ca_path, ca_cert.public_bytes(serialization.Encoding.PEM))
    write_private(
        keystore_path,
        _pem_key(key)
        + cert.public_bytes(serialization.Encoding.PEM)
        + ca_cert.public_bytes(serialization.Encoding.PEM),
    )
    return BrokerCerts(ca=str(ca_path), keystore=str(keystore_path), principal=f"User:{BROKER_DN}")
