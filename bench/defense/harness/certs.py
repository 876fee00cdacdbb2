"""Throwaway TLS certificates for scripted servers on 127.0.0.1 (the openssl CLI).

One CA per `Certs`; `leaf(label)` is a certificate for `localhost` and
127.0.0.1 signed by it, one per label (the same label gives the same
certificate), so a server can be replaced by another that the gateway trusts
just as much but that is not the same certificate.
"""

from __future__ import annotations

import base64
import subprocess
import tempfile
from pathlib import Path


class Certs:
    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="portcullis-bench-certs-")
        self.dir = Path(self._tmp.name)
        self.ca_cert = self.dir / "ca.pem"
        self.ca_key = self.dir / "ca.key"
        self._run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", str(self.ca_key), "-out", str(self.ca_cert), "-days", "2", "-subj", "/CN=bench CA",
                  "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self._leaves: dict[str, tuple[str, str]] = {}

    def leaf(self, label: str) -> tuple[str, str]:
        """(certificate, key) PEM paths for `label`."""
        if label in self._leaves:
            return self._leaves[label]
        n = len(self._leaves)
        key = self.dir / f"leaf{n}.key"
        csr = self.dir / f"leaf{n}.csr"
        cert = self.dir / f"leaf{n}.pem"
        ext = self.dir / f"leaf{n}.ext"
        ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
                       "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n")
        self._run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
                  "-out", str(csr), "-subj", "/CN=localhost")
        self._run("x509", "-req", "-in", str(csr), "-CA", str(self.ca_cert), "-CAkey", str(self.ca_key),
                  "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))
        self._leaves[label] = (str(cert), str(key))
        return self._leaves[label]

    def spki_pin(self, label: str) -> str:
        """`sha256/<base64>` of the public key of `label`'s certificate (an
        upstream's `tls_pins` entry), computed by the openssl CLI."""
        cert, _ = self.leaf(label)
        pub = subprocess.run(["openssl", "x509", "-in", cert, "-pubkey", "-noout"], check=True, capture_output=True).stdout
        der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub, check=True,
                             capture_output=True).stdout
        digest = subprocess.run(["openssl", "dgst", "-sha256", "-binary"], input=der, check=True,
                                capture_output=True).stdout
        return "sha256/" + base64.b64encode(digest).decode()

    def _run(self, *args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=self.dir)

    def close(self) -> None:
        self._tmp.cleanup()
