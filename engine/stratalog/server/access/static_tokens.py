"""A token file for ``stratalog serve`` outside Kubernetes (``--token-file``).

The format is kube-apiserver's ``--token-auth-file``: one CSV line per token,
``token,user,uid,"group1,group2"``, so one file can serve both. What a token may do comes from
its groups: ``stratalog:VERB`` grants VERB on every topic, ``stratalog:VERB:TOPIC`` on one
(verbs: consume, produce, administer, replicate). A token with no such group is known but may
do nothing. Lines starting with ``#`` and blank lines are skipped.

Tokens are looked up by their SHA-256, so the comparison does not depend on how many leading
characters of a guess match.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

from stratalog.common.errors import AuthenticationFailedError, InvalidTopicError
from stratalog.common.names import validate_topic_name
from stratalog.server.access.model import Principal, Verb

GROUP_PREFIX = "stratalog:"
VERBS = {verb.value: verb for verb in Verb}


class TokenFileError(ValueError):
    """A token file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Grant:
    verb: Verb
    topic: str | None   # None: every topic


class StaticTokens:
    """Authenticator and authorizer over a token file."""

    def __init__(self, entries: dict[bytes, tuple[Principal, tuple[Grant, ...]]]) -> None:
        self._entries = entries

    @classmethod
    def from_file(cls, path: Path) -> StaticTokens:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise TokenFileError(f"token file {path}: cannot read it: {error}") from None
        entries: dict[bytes, tuple[Principal, tuple[Grant, ...]]] = {}
        for number, row in enumerate(csv.reader(text.splitlines()), start=1):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            where = f"token file {path}, line {number}"
            if len(row) < 3 or not row[0] or not row[1]:
                raise TokenFileError(f"{where}: expected token,user,uid[,\"group1,group2\"]")
            groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
            digest = _digest(row[0])
            if digest in entries:
                raise TokenFileError(f"{where}: the same token appears twice")
            entries[digest] = (Principal(row[1], groups, row[2]), tuple(_grant(g, where) for g in groups
                                                                          if g.startswith(GROUP_PREFIX)))
        if not entries:
            raise TokenFileError(f"token file {path}: no token in it")
        return cls(entries)

    async def authenticate(self, token: str) -> Principal:
        entry = self._entries.get(_digest(token))
        if entry is None:
            raise AuthenticationFailedError("the token is not in the token file")
        return entry[0]

    async def allowed(self, principal: Principal, verb: Verb, topic: str | None) -> bool:
        grants = next((g for p, g in self._entries.values() if p == principal), ())
        return any(g.verb is verb and (g.topic is None or g.topic == topic) for g in grants)


def _grant(group: str, where: str) -> Grant:
    verb, colon, topic = group[len(GROUP_PREFIX):].partition(":")
    if verb not in VERBS:
        raise TokenFileError(f"{where}: group {group!r} names no verb; expected stratalog:VERB[:TOPIC] with VERB "
                             f"one of {', '.join(VERBS)}")
    if colon:   # a topic was meant: an empty or malformed one must not widen the grant to every topic
        try:
            validate_topic_name(topic)
        except InvalidTopicError as error:
            raise TokenFileError(f"{where}: group {group!r}: {error}") from None
    return Grant(VERBS[verb], topic if colon else None)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
