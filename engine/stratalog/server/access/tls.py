"""The listeners' TLS context, from a certificate and key on disk, reloaded when they change.

In Kubernetes the files come from a Secret in cert-manager's layout (``tls.crt``, ``tls.key``)
mounted as a volume; the kubelet replaces them in place when the certificate is renewed. The
same ``ssl.SSLContext`` serves both listeners: loading the new pair into it changes what every
later handshake presents, while connections already open keep theirs, so a rotation needs no
restart. A pair that fails to load (half-written, or a key that does not match) is logged and
the previous one stays in use.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

FileStamp = tuple[int, int, int]   # inode, mtime ns, size


class TLSFilesError(ValueError):
    """A certificate or key that cannot be used; the message names the file."""


class ReloadingTLS:
    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = cert, key
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.reloads = 0
        self._stamps = self._stamp()
        self._load()

    def _stamp(self) -> tuple[FileStamp, FileStamp]:
        stamps = []
        for path in (self.cert, self.key):
            try:
                st = os.stat(path)   # follows the kubelet's ..data symlink to the current files
            except OSError as error:
                raise TLSFilesError(f"TLS file {path}: {error.strerror}") from None
            stamps.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return stamps[0], stamps[1]

    def _load(self) -> None:
        """Load the pair into the live context only once it is known to load.

        ``load_cert_chain`` on a context in use is not atomic: a key that does not match the new
        certificate leaves the context with neither pair, and every later handshake fails. So the
        files are copied once (they may change again meanwhile), the copy is tried on a scratch
        context, and only then loaded into the live one.
        """
        try:
            cert_pem, key_pem = self.cert.read_bytes(), self.key.read_bytes()
        except OSError as error:
            raise TLSFilesError(f"TLS certificate {self.cert} with key {self.key}: {error.strerror}") from None
        with tempfile.TemporaryDirectory(prefix="stratalog-tls-") as scratch:
            cert, key = Path(scratch, "tls.crt"), Path(scratch, "tls.key")
            cert.write_bytes(cert_pem)
            key.touch(mode=0o600)
            key.write_bytes(key_pem)
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
                self.context.load_cert_chain(cert, key)
            except ssl.SSLError as error:
                raise TLSFilesError(f"TLS certificate {self.cert} with key {self.key}: {error}") from None

    def reload_if_changed(self) -> bool:
        """Load the pair again if either file changed since the last look; whether it did."""
        try:
            stamps = self._stamp()
        except TLSFilesError as error:
            logger.warning("%s; the current certificate stays in use", error)
            return False
        if stamps == self._stamps:
            return False
        try:
            self._load()
        except TLSFilesError as error:
            logger.warning("%s; the current certificate stays in use", error)
            return False   # looked at again next time: the other file may still be on its way
        self._stamps = stamps
        self.reloads += 1
        logger.info("TLS certificate %s reloaded", self.cert)
        return True

    async def watch(self, interval_s: float) -> None:
        """Look for a new pair every ``interval_s`` until cancelled."""
        while True:
            await asyncio.sleep(interval_s)
            self.reload_if_changed()
