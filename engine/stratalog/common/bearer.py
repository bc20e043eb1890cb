"""Bearer tokens: what one looks like, and reading one from a file.

Shared by every side that presents or checks a token (the HTTP and Kafka listeners, the CLI, the
replication client, Spark's HTTP store), so that they agree on both. A projected ServiceAccount
token is renewed in place by the kubelet, so a token file is read each time it is needed.
"""

from __future__ import annotations

from pathlib import Path

from stratalog.common.errors import AuthenticationFailedError

MAX_TOKEN_CHARS = 4096   # a ServiceAccount token is about 1 KiB; anything far larger is not one


def is_token(text: str) -> bool:
    """Printable ASCII without spaces, of a sane length: the shape of every bearer token we accept."""
    return 0 < len(text) <= MAX_TOKEN_CHARS and text.isascii() and text.isprintable() and " " not in text


def read_token_file(path: str | Path) -> str:
    """The token in ``path``; raises ``AuthenticationFailedError`` naming the file when there is none."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8"
        raise AuthenticationFailedError(f"token file {path}: {reason}") from None
    if not is_token(token):
        raise AuthenticationFailedError(f"token file {path}: holds no token (empty, too long or not printable)")
    return token
