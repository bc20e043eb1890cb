"""host:port, read one way by every listener flag, advertised address and Lease annotation."""

from __future__ import annotations

import pytest

from stratalog.common.addresses import split_host_port


@pytest.mark.parametrize("text, address", [
    ("127.0.0.1:9092", ("127.0.0.1", 9092)),
    ("dir-a.ns.svc:9092", ("dir-a.ns.svc", 9092)),
    ("[fd00::7]:9093", ("fd00::7", 9093)),      # an IPv6 host in brackets loses them
    (":8092", ("", 8092)),                      # no host: the caller says what that means
    ("0.0.0.0:0", ("0.0.0.0", 0)),              # port 0: a listener picks a free one
    ("nowhere", None),
    ("host:", None),
    ("host:http", None),
    ("host:65536", None),
    ("host:-1", None),
])
def test_host_and_port_are_split_at_the_last_colon_and_the_port_must_be_a_tcp_port(text, address):
    assert split_host_port(text) == address
