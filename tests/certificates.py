"""Certificates for the TLS tests, made with the real ``openssl`` command line: a CA, and server
certificates it signs for 127.0.0.1. Not a test module."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"openssl {' '.join(args)}:\n{done.stderr}"


@dataclass(frozen=True)
class Authority:
    cert: Path
    key: Path

    @classmethod
    def create(cls, directory: Path, name: str = "test-ca") -> Authority:
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / f"{name}.crt", directory / f"{name}.key"
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}")
        return cls(cert, key)

    def issue(self, directory: Path, common_name: str, *, serial: int, names: tuple[str, ...] = ("localhost",)
              ) -> tuple[Path, Path]:
        """A server certificate for 127.0.0.1 and ``names``: (tls.crt, tls.key) as cert-manager names them."""
        directory.mkdir(parents=True, exist_ok=True)
        key, request, cert = directory / "tls.key.new", directory / "tls.csr", directory / "tls.crt.new"
        extensions = directory / "ext.cnf"
        alt = ",".join(["IP:127.0.0.1", *(f"DNS:{n}" for n in names)])
        extensions.write_text(f"subjectAltName={alt}\nextendedKeyUsage=serverAuth\n")
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
                 "-out", str(request), "-subj", f"/CN={common_name}")
        _openssl("x509", "-req", "-in", str(request), "-CA", str(self.cert), "-CAkey", str(self.key),
                 "-set_serial", str(serial), "-days", "1", "-extfile", str(extensions), "-out", str(cert))
        # Both files replaced by rename, as the kubelet swaps a Secret volume's files.
        key.replace(directory / "tls.key")
        cert.replace(directory / "tls.crt")
        return directory / "tls.crt", directory / "tls.key"
