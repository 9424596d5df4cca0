"""TLS of the hub when it listens beyond loopback: a certificate the instructor gives
(`--ssl-cert/--ssl-key`), or one `up` makes, self-signed, for this machine's names and the bound
address, kept with the other secrets; its SHA-256 fingerprint is printed for the class to check
against what their browser shows."""

import os
import socket
import subprocess
from pathlib import Path

from handson_lib.classroom.layout import ClassroomError, Layout

DAYS = 365


def self_signed_paths(lay: Layout):
    return lay.secrets / "tls" / "hub.crt", lay.secrets / "tls" / "hub.key"


def _names(bind):
    names = {"localhost", socket.gethostname(), socket.getfqdn()}
    addresses = {"127.0.0.1"}
    if bind and bind not in ("0.0.0.0", "::"):
        (addresses if bind.replace(".", "").isdigit() or ":" in bind else names).add(bind)
    return sorted(names), sorted(addresses)


def ensure_self_signed(lay: Layout, bind):
    """A self-signed certificate and key for the hub (made once; made again when `bind` is a name or
    address it does not cover)."""
    cert, key = self_signed_paths(lay)
    names, addresses = _names(bind)
    alt = ",".join([f"DNS:{n}" for n in names] + [f"IP:{a}" for a in addresses])
    covered = cert.with_suffix(".names")
    if cert.exists() and key.exists() and covered.exists() and covered.read_text() == alt:
        return cert, key
    cert.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(cert.parent, 0o700)
    result = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:3072", "-nodes", "-sha256",
                             "-days", str(DAYS), "-subj", f"/CN={socket.getfqdn()}", "-addext",
                             f"subjectAltName={alt}", "-keyout", str(key), "-out", str(cert)],
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise ClassroomError(f"openssl could not make the hub's certificate: {result.stderr.strip()[-500:]}")
    os.chmod(key, 0o600)
    cert.with_suffix(".names").write_text(alt)
    return cert, key


def check_given(cert, key):
    """The instructor's certificate and key: both given, readable, and a pair."""
    if bool(cert) != bool(key):
        raise ClassroomError("--ssl-cert and --ssl-key go together")
    for path in (cert, key):
        if not Path(path).is_file():
            raise ClassroomError(f"{path} is not a file")
    public = [subprocess.run(["openssl", kind, "-in", str(path), *flags], capture_output=True,
                             text=True, timeout=30)
              for kind, path, flags in (("x509", cert, ["-noout", "-pubkey"]), ("pkey", key, ["-pubout"]))]
    if any(r.returncode != 0 for r in public) or public[0].stdout != public[1].stdout:
        raise ClassroomError(f"{key} is not the key of the certificate {cert}")
    return str(Path(cert).resolve()), str(Path(key).resolve())


def fingerprint(cert):
    result = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256"],
                            capture_output=True, text=True, timeout=30)
    return result.stdout.strip().split("=", 1)[-1] if result.returncode == 0 else "unknown"
