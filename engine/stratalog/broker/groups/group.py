"""One consumer group's members and the pure decisions of its rebalances (Kafka's GroupMetadata).

A group moves Empty → PreparingRebalance (members rejoin) → CompletingRebalance (the leader's
SyncGroup brings the assignment) → Stable, and back to PreparingRebalance when a member joins,
changes its protocols, leaves or lets its session lapse. The coordinator drives the moves and
the waiting; what is decided here needs no event loop: which protocol the members share, who
leads, which members lapsed, whether a rebalance has heard from everyone, which committed
offsets have outlived ``offsets.retention.minutes``.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from stratalog.broker.groups.offsets_records import CommittedOffset
from stratalog.common.names import TopicPartition


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]   # (assignor name, subscription metadata), most preferred first
    last_heartbeat_ms: int
    assignment: bytes = b""
    rejoined: bool = False               # has sent JoinGroup in the rebalance under way

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)   # ids given with MEMBER_ID_REQUIRED, not joined yet
    empty_since_ms: int | None = None    # when its last member left (Kafka's currentStateTimestamp)

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member with these protocols may join: same type, and a protocol in common."""
        if not self.members:
            return bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        return bool(names & common_protocols(self.members.values()))

    def empty(self, now_ms: int) -> None:
        """No members left: no protocol, no leader (the generation is the caller's to move)."""
        self.state, self.protocol, self.protocol_type, self.leader = GroupState.EMPTY, None, None, None
        self.empty_since_ms = now_ms

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)


def common_protocols(members: object) -> set[str]:
    sets = [{name for name, _ in m.protocols} for m in members]  # type: ignore[attr-defined]
    return set.intersection(*sets) if sets else set()


def select_protocol(members: list[Member]) -> str | None:
    """Kafka's vote: each member votes for its most preferred protocol that all members support;
    the most votes wins (ties to the first member's preference)."""
    candidates = common_protocols(members)
    if not candidates:
        return None
    votes = Counter(next(name for name, _ in m.protocols if name in candidates) for m in members)
    best = max(votes.values())
    first_choice = [name for name, _ in members[0].protocols if name in candidates and votes[name] == best]
    return first_choice[0] if first_choice else max(votes, key=lambda name: votes[name])


def lapsed_members(group: Group, now_ms: int, waiting: set[str]) -> list[str]:
    """Members whose session ran out without a heartbeat; those waiting on a join or sync answer
    are exempt (their wait is the coordinator's, not theirs)."""
    return [m.member_id for m in group.members.values()
            if m.member_id not in waiting and now_ms - m.last_heartbeat_ms > m.session_timeout_ms]


def everyone_rejoined(group: Group) -> bool:
    return all(m.rejoined for m in group.members.values())


def next_leader(group: Group) -> str | None:
    """The leader stays if it is still a member; else the first member to have joined."""
    if group.leader in group.members:
        return group.leader
    return next(iter(group.members), None)


def expired_offsets(group: Group | None, offsets: Mapping[TopicPartition, CommittedOffset], now_ms: int,
                    retention_ms: int) -> list[TopicPartition]:
    """The committed offsets Kafka's retention removes now (KIP-211): all of a group's once it has
    been without members for ``retention_ms``; for a consumer that never joined a group here (a
    standalone commit, or a group not seen since a restart), each one ``retention_ms`` after its
    commit. A group with members keeps its offsets."""
    if group is not None and group.members:
        return []
    if group is not None and group.empty_since_ms is not None:
        return list(offsets) if now_ms - group.empty_since_ms >= retention_ms else []
    return [tp for tp, c in offsets.items() if now_ms - c.commit_timestamp >= retention_ms]
