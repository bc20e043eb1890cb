"""Access control's pure parts: the token file, the SASL messages, the gate's rules."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratalog.common.errors import AuthenticationFailedError, ClusterAuthorizationFailedError, \
    TopicAuthorizationFailedError
from stratalog.server.access.model import ANONYMOUS, OPEN, AccessControl, Verb
from stratalog.server.access.static_tokens import StaticTokens, TokenFileError
from stratalog.server.kafka.sasl import token_of


def tokens(tmp_path: Path, text: str) -> StaticTokens:
    path = tmp_path / "tokens.csv"
    path.write_text(text)
    return StaticTokens.from_file(path)


def test_a_token_files_groups_grant_verbs_on_every_topic_or_on_one(tmp_path):
    file = tokens(tmp_path, '# comment\n\nt1,alice,1,"stratalog:produce,team-a"\nt2,bob,2,"stratalog:consume:orders"\n'
                            "t3,carol,3\n")
    alice, bob, carol = (asyncio.run(file.authenticate(t)) for t in ("t1", "t2", "t3"))
    assert (alice.name, alice.groups) == ("alice", ("stratalog:produce", "team-a"))
    allowed = lambda who, verb, topic: asyncio.run(file.allowed(who, verb, topic))  # noqa: E731
    assert allowed(alice, Verb.PRODUCE, "orders") and allowed(alice, Verb.PRODUCE, None)
    assert not allowed(alice, Verb.CONSUME, "orders")
    assert allowed(bob, Verb.CONSUME, "orders") and not allowed(bob, Verb.CONSUME, "events")
    assert not allowed(bob, Verb.CONSUME, None)   # one topic is not every topic
    assert not any(allowed(carol, verb, "orders") for verb in Verb)
    with pytest.raises(AuthenticationFailedError):
        asyncio.run(file.authenticate("t4"))


@pytest.mark.parametrize("text, said", [
    ("", "no token in it"),
    ("t1,alice\n", "line 1: expected token,user,uid"),
    ('# x\nt1,alice,1,"stratalog:read"\n', "line 2: group 'stratalog:read' names no verb"),
    ("t1,alice,1\nt1,bob,2\n", "line 2: the same token appears twice"),
    (",alice,1\n", "line 1: expected"),
    ('t1,alice,1,"stratalog:consume:"\n', "line 1: group 'stratalog:consume:': topic name is empty"),
    ('t1,alice,1,"stratalog:consume:a/b"\n', "line 1: group 'stratalog:consume:a/b'"),
])
def test_a_bad_token_file_is_refused_naming_the_line(tmp_path, text, said):
    with pytest.raises(TokenFileError, match=said):
        tokens(tmp_path, text)


def test_a_missing_token_file_is_refused_naming_it(tmp_path):
    with pytest.raises(TokenFileError, match="nowhere.csv: cannot read it"):
        StaticTokens.from_file(tmp_path / "nowhere.csv")


def test_the_gate_refuses_with_the_verb_and_the_resource_and_counts_it(tmp_path):
    file = tokens(tmp_path, 't1,alice,1,"stratalog:produce:orders"\n')
    denied: list[str] = []
    gate = AccessControl(file, file, on_denied=denied.append)
    alice = asyncio.run(gate.authenticate("t1", "here"))
    with pytest.raises(TopicAuthorizationFailedError) as topic:
        asyncio.run(gate.authorize(alice, Verb.CONSUME, "orders", "GET x"))
    assert (topic.value.verb, topic.value.resource) == ("consume", "topic orders")
    with pytest.raises(ClusterAuthorizationFailedError):
        asyncio.run(gate.authorize(alice, Verb.ADMINISTER, None, "POST y"))
    assert denied == ["consume", "administer"]
    with pytest.raises(AuthenticationFailedError, match="no credential"):
        asyncio.run(gate.authenticate(None, "here"))
    assert asyncio.run(OPEN.authenticate(None, "here")) is ANONYMOUS
    with pytest.raises(ValueError):
        AccessControl(file, None)


@pytest.mark.parametrize("mechanism, message, token", [
    ("PLAIN", b"\0user\0the-token", "the-token"),
    ("PLAIN", b"authz\0user\0the-token", "the-token"),
    ("OAUTHBEARER", b"n,,\x01auth=Bearer the-token\x01\x01", "the-token"),
    ("OAUTHBEARER", b"n,a=user,\x01host=x\x01auth=Bearer the-token\x01\x01", "the-token"),
])
def test_sasl_messages_give_their_token(mechanism, message, token):
    assert token_of(mechanism, message) == token


@pytest.mark.parametrize("mechanism, message, said", [
    ("PLAIN", b"user\0the-token", "NUL separators"),
    ("PLAIN", b"\0user\0", "empty"),
    ("PLAIN", b"\xff\0user\0t", "not UTF-8"),
    ("OAUTHBEARER", b"auth=Bearer t\x01\x01", "GS2 header"),
    ("OAUTHBEARER", b"n,,\x01auth=Basic t\x01\x01", "auth=Bearer"),
    ("OAUTHBEARER", b"n,,\x01auth=Bearer t", "not ended"),
    ("OAUTHBEARER", b"n,,\x01noequals\x01\x01", "is not key=value"),
    ("PLAIN", b"\0u\0" + b"x" * 20_000, "bytes of credentials"),
])
def test_malformed_sasl_messages_are_refused_saying_what_is_wrong(mechanism, message, said):
    with pytest.raises(AuthenticationFailedError, match=said):
        token_of(mechanism, message)


@given(mechanism=st.sampled_from(["PLAIN", "OAUTHBEARER"]), message=st.binary(max_size=300))
def test_any_sasl_message_gives_a_token_or_a_typed_refusal(mechanism, message):
    try:
        token = token_of(mechanism, message)
    except AuthenticationFailedError:
        return
    assert token and token.isascii() and token.isprintable() and " " not in token
