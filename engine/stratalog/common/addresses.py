"""``host:port`` as every listener flag, advertised address and Lease annotation writes it.

One reading for all of them (``[v6]:port`` included), so that what an agent advertises, what a
flag accepts and what the operator reads back cannot drift apart. The callers decide what a
missing host means (a listener binds every interface; an advertised address needs one).
"""

from __future__ import annotations


def split_host_port(text: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host:port`` or ``[v6]:port``, the host possibly empty; None when the text
    is not one (no colon, a port that is not a number from 0 to 65535)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)
