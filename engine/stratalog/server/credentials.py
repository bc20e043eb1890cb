"""What an engine presents to another when it replicates, over either transport.

A follower fetches from its leader over HTTP or over the Kafka listener (``replica_clients``);
both present the same credentials: a bearer token (a ServiceAccount token in Kubernetes) and
the CA its TLS peers' certificates must chain to.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path

from stratalog.common.bearer import read_token_file

TOKEN_REREAD_S = 30.0   # far under a projected token's renewal margin (12 min of an hour)


@dataclass(frozen=True)
class Credentials:
    """A bearer token read from a file (read again every ``TOKEN_REREAD_S``: the kubelet renews a
    projected ServiceAccount token in place, at 80% of its lifetime) and the CA its TLS peers'
    certificates must chain to."""

    token_file: Path | None = None
    ca_file: Path | None = None

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)

    def require_tls_for_token(self, tls: bool, where: str) -> None:
        """With TLS in use here (a CA is given) the token goes over TLS only: a peer advertised
        in clear does not get it."""
        if not tls and self.ca_file is not None and self.token_file is not None:
            raise OSError(f"{where} is not TLS: the replication token is sent over TLS only")


NO_CREDENTIALS = Credentials()


@dataclass
class TokenCache:
    """The token as last read, read again once it is ``TOKEN_REREAD_S`` old (not a file read per round)."""

    credentials: Credentials
    _read: tuple[float, str | None] | None = field(default=None, repr=False)

    def token(self) -> str | None:
        now = time.monotonic()
        if self._read is None or now - self._read[0] >= TOKEN_REREAD_S:
            token_file = self.credentials.token_file
            self._read = (now, None if token_file is None else read_token_file(token_file))
        return self._read[1]
