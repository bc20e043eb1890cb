"""Kafka's classic group coordinator on the event loop: join, sync, heartbeat, leave, and offsets.

Members of a group join (JoinGroup), the coordinator waits until every known member has
rejoined or the rebalance timeout passes (for a new group, ``group.initial.rebalance.delay.ms``
for more members to arrive), then answers every join at once: the leader with all members'
subscriptions. The leader's SyncGroup brings the assignment, which every member's SyncGroup
then receives. Heartbeats keep sessions alive and tell members of a rebalance; a member whose
session lapses is removed as if it had left. A new member of a v4+ JoinGroup first gets its id
with MEMBER_ID_REQUIRED (KIP-394). Static membership (``group.instance.id``) is treated as
dynamic. Results carry Kafka's error names; the transport turns them into codes.

Committed offsets are records of ``__consumer_offsets`` (``offsets_records``). This engine
coordinates the groups of the partitions of that topic it leads (``ownership``): their offsets
are read back into memory when it starts leading one, and any other group is answered
NOT_COORDINATOR. Group membership is in memory only: after a restart, or when coordination
moves, the members rejoin (UNKNOWN_MEMBER_ID or NOT_COORDINATOR tells them to).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stratalog.broker.groups.group import Group, GroupState, Member, everyone_rejoined, expired_offsets, \
    lapsed_members, next_leader, select_protocol
from stratalog.broker.groups.offsets_records import OFFSETS_TOPIC, CommittedOffset, offset_key, offset_value, \
    partition_for
from stratalog.broker.groups.ownership import LedPartitions, OffsetsPlacement, local_placement
from stratalog.broker.produce import Acks
from stratalog.common.errors import StratalogError, TopicExistsError
from stratalog.common.names import TopicPartition
from stratalog.records import Record, build_batch

if TYPE_CHECKING:
    from stratalog.broker.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

NONE = "NONE"
EXPIRY_CHECK_S = 0.25


@dataclass(frozen=True)
class JoinResult:
    error: str
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, bytes]] = field(default_factory=list)   # for the leader only


@dataclass(frozen=True)
class SyncResult:
    error: str
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol: str | None = None


class GroupCoordinator:
    def __init__(self, broker: ReplicaManager, *, placement: OffsetsPlacement | None = None,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.broker = broker
        config = broker.engine.config
        self.initial_delay_ms = config.group_initial_rebalance_delay_ms
        self.min_session_ms = config.group_min_session_timeout_ms
        self.max_session_ms = config.group_max_session_timeout_ms
        self.placement = placement or local_placement(broker)
        self.metadata_max_bytes = config.offset_metadata_max_bytes
        self.retention_ms = config.offsets_retention_minutes * 60_000
        self.retention_check_s = config.offsets_retention_check_interval_ms / 1000
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self._joins: dict[str, dict[str, asyncio.Future[JoinResult]]] = {}
        self._syncs: dict[str, dict[str, asyncio.Future[SyncResult]]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._initial_delay: set[str] = set()   # groups in their first rebalance's wait for more members
        self._initial_deadline: dict[str, float] = {}   # when that wait ends at the latest (loop time)
        self._expiry: asyncio.Task[None] | None = None
        self._retention: asyncio.Task[None] | None = None
        self._resignations: asyncio.Task[None] | None = None
        self._offsets_topic_made = False
        self.led = LedPartitions(broker, self.placement, self.groups.keys(), self._forget)
        self.offsets = self.led.offsets    # the committed offsets of the groups coordinated here

    # -- lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        """Read back the committed offsets of the partitions led now, then watch sessions."""
        await self.led.load_led()
        self._expiry = asyncio.get_running_loop().create_task(self._expire_sessions())
        self._retention = asyncio.get_running_loop().create_task(self._retain_offsets())
        self._resignations = asyncio.get_running_loop().create_task(self.led.watch_resignations())

    async def close(self) -> None:
        """Stop: joins and syncs still waiting are told to find the coordinator again (NOT_COORDINATOR)."""
        for waiting in self._joins.values():
            for member_id, join in waiting.items():
                if not join.done():
                    join.set_result(JoinResult("NOT_COORDINATOR", member_id=member_id))
        for waiting_syncs in self._syncs.values():
            for sync in waiting_syncs.values():
                if not sync.done():
                    sync.set_result(SyncResult("NOT_COORDINATOR"))
        for task in (self._expiry, self._retention, self._resignations):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        for timer in self._timers.values():
            timer.cancel()

    # -- which groups are coordinated here ------------------------------------------------------------
    async def coordinating(self, group_id: str) -> str:
        """NONE when this engine coordinates ``group_id``, else the error to answer (NOT_COORDINATOR)."""
        return await self.led.coordinating(group_id)

    def _forget(self, group_ids: list[str]) -> None:
        """Drop the members of groups coordinated elsewhere now; whoever waits is told to look again."""
        for group_id in group_ids:
            for member_id, join in self._joins.pop(group_id, {}).items():
                if not join.done():
                    join.set_result(JoinResult("NOT_COORDINATOR", member_id=member_id))
            for sync in self._syncs.pop(group_id, {}).values():
                if not sync.done():
                    sync.set_result(SyncResult("NOT_COORDINATOR"))
            timer = self._timers.pop(group_id, None)
            if timer is not None:
                timer.cancel()
            self._initial_delay.discard(group_id)
            self.groups.pop(group_id, None)

    # -- JoinGroup ----------------------------------------------------------------------------------
    async def join(self, group_id: str, member_id: str, client_id: str, client_host: str, session_timeout_ms: int,
                   rebalance_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                   require_known_member: bool) -> JoinResult:
        if not group_id:
            return JoinResult("INVALID_GROUP_ID", member_id=member_id)
        refusal = await self.coordinating(group_id)
        if refusal != NONE:
            return JoinResult(refusal, member_id=member_id)
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return JoinResult("INVALID_SESSION_TIMEOUT", member_id=member_id)
        group = self.groups.setdefault(group_id, Group(group_id))
        if not group.supports(protocol_type, protocols):
            return JoinResult("INCONSISTENT_GROUP_PROTOCOL", member_id=member_id)
        if member_id and member_id not in group.members and member_id not in group.pending_members:
            return JoinResult("UNKNOWN_MEMBER_ID", member_id=member_id)
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member:
                group.pending_members.add(member_id)
                return JoinResult("MEMBER_ID_REQUIRED", member_id=member_id)
        group.pending_members.discard(member_id)
        now = self.clock()
        known = group.members.get(member_id)
        if (known is not None and group.state is GroupState.STABLE and known.protocols == protocols
                and member_id != group.leader):
            # A follower rejoining with nothing new: the current generation, no rebalance (Kafka's rule).
            known.last_heartbeat_ms = now
            return JoinResult(NONE, group.generation, group.protocol_type, group.protocol, group.leader or "",
                              member_id)
        if known is None:
            known = group.members[member_id] = Member(member_id, client_id, client_host, session_timeout_ms,
                                                      rebalance_timeout_ms, protocol_type, protocols, now)
            new_member = True
        else:
            known.protocols, known.session_timeout_ms = protocols, session_timeout_ms
            known.rebalance_timeout_ms, known.last_heartbeat_ms = rebalance_timeout_ms, now
            new_member = False
        known.rejoined = True
        if group.protocol_type is None:
            group.protocol_type = protocol_type
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        previous = self._joins.setdefault(group_id, {}).pop(member_id, None)
        if previous is not None and not previous.done():   # a join sent again while the first waits
            previous.set_result(JoinResult("UNKNOWN_MEMBER_ID", member_id=member_id))
        self._joins[group_id][member_id] = future
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, initial=group.state is GroupState.EMPTY)
        elif new_member and group_id in self._initial_delay:
            # Each new member waits for more, but never past the rebalance timeout from the first
            # (Kafka's InitialDelayedJoin): a member that keeps rejoining cannot hold the group off.
            left = self._initial_deadline[group_id] - asyncio.get_running_loop().time()
            self._schedule(group, max(0, min(self.initial_delay_ms, int(left * 1000))))
        self._maybe_complete_join(group)
        return await future

    def _prepare_rebalance(self, group: Group, *, initial: bool) -> None:
        logger.info("group %s: rebalancing after generation %d (%s)", group.group_id, group.generation,
                    group.state.value)
        for sync in self._syncs.pop(group.group_id, {}).values():
            if not sync.done():
                sync.set_result(SyncResult("REBALANCE_IN_PROGRESS"))
        group.state = GroupState.PREPARING_REBALANCE
        if initial and self.initial_delay_ms > 0:
            self._initial_delay.add(group.group_id)
            limit_ms = max(group.rebalance_timeout_ms(), 1)
            self._initial_deadline[group.group_id] = asyncio.get_running_loop().time() + limit_ms / 1000
            self._schedule(group, min(self.initial_delay_ms, limit_ms))
        else:
            self._schedule(group, group.rebalance_timeout_ms())

    def _schedule(self, group: Group, delay_ms: int) -> None:
        timer = self._timers.pop(group.group_id, None)
        if timer is not None:
            timer.cancel()
        self._timers[group.group_id] = asyncio.get_running_loop().call_later(
            delay_ms / 1000, self._rebalance_timer_fired, group.group_id)

    def _rebalance_timer_fired(self, group_id: str) -> None:
        self._timers.pop(group_id, None)
        self._initial_delay.discard(group_id)
        group = self.groups.get(group_id)
        if group is not None and group.state is GroupState.PREPARING_REBALANCE:
            self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if (group.state is GroupState.PREPARING_REBALANCE and group.group_id not in self._initial_delay
                and everyone_rejoined(group)):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        timer = self._timers.pop(group.group_id, None)
        if timer is not None:
            timer.cancel()
        for member_id in [m for m, member in group.members.items() if not member.rejoined]:
            del group.members[member_id]   # did not rejoin within the rebalance timeout
        group.generation += 1
        joins = self._joins.pop(group.group_id, {})
        if not group.members:
            group.empty(self.clock())
            return
        members = list(group.members.values())
        group.protocol = select_protocol(members)
        group.leader = next_leader(group)
        group.state = GroupState.COMPLETING_REBALANCE
        logger.info("group %s: generation %d with %d member(s), protocol %s, leader %s", group.group_id,
                    group.generation, len(members), group.protocol, group.leader)
        now = self.clock()
        everyone = [(m.member_id, m.metadata_for(group.protocol)) for m in members]
        for member in members:
            member.rejoined = False
            member.last_heartbeat_ms = now
            future = joins.get(member.member_id)
            if future is not None and not future.done():
                future.set_result(JoinResult(NONE, group.generation, group.protocol_type, group.protocol,
                                             group.leader or "", member.member_id,
                                             everyone if member.member_id == group.leader else []))

    # -- SyncGroup ----------------------------------------------------------------------------------
    async def sync(self, group_id: str, generation: int, member_id: str,
                   assignments: Sequence[tuple[str, bytes]]) -> SyncResult:
        refusal = await self.coordinating(group_id)
        if refusal != NONE:
            return SyncResult(refusal)
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return SyncResult("UNKNOWN_MEMBER_ID")
        if generation != group.generation:
            return SyncResult("ILLEGAL_GENERATION")
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult("REBALANCE_IN_PROGRESS")
        member = group.members[member_id]
        member.last_heartbeat_ms = self.clock()
        if group.state is GroupState.STABLE:
            return SyncResult(NONE, member.assignment, group.protocol_type, group.protocol)
        if member_id == group.leader:
            given = dict(assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            group.state = GroupState.STABLE
            logger.info("group %s: generation %d stable (the leader's assignment is in)", group_id, group.generation)
            for waiting_id, answer in self._syncs.pop(group_id, {}).items():
                if not answer.done():
                    waiting = group.members.get(waiting_id)
                    answer.set_result(SyncResult(NONE, waiting.assignment if waiting else b"", group.protocol_type,
                                                 group.protocol))
            return SyncResult(NONE, member.assignment, group.protocol_type, group.protocol)
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        earlier = self._syncs.setdefault(group_id, {}).pop(member_id, None)
        if earlier is not None and not earlier.done():   # a retry (perhaps on a new connection): one answer
            earlier.set_result(SyncResult("REBALANCE_IN_PROGRESS"))
        self._syncs[group_id][member_id] = future
        return await future

    # -- Heartbeat, LeaveGroup, expiry ----------------------------------------------------------------
    async def heartbeat(self, group_id: str, generation: int, member_id: str) -> str:
        refusal = await self.coordinating(group_id)
        if refusal != NONE:
            return refusal
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return "UNKNOWN_MEMBER_ID"
        if generation != group.generation:
            return "ILLEGAL_GENERATION"
        group.members[member_id].last_heartbeat_ms = self.clock()
        if group.state is GroupState.PREPARING_REBALANCE:
            return "REBALANCE_IN_PROGRESS"
        return NONE

    async def leave(self, group_id: str, member_id: str) -> str:
        refusal = await self.coordinating(group_id)
        if refusal != NONE:
            return refusal
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return "UNKNOWN_MEMBER_ID"
        self._remove(group, member_id)
        return NONE

    def _remove(self, group: Group, member_id: str) -> None:
        del group.members[member_id]
        join = self._joins.get(group.group_id, {}).pop(member_id, None)
        if join is not None and not join.done():
            join.set_result(JoinResult("UNKNOWN_MEMBER_ID", member_id=member_id))
        sync = self._syncs.get(group.group_id, {}).pop(member_id, None)
        if sync is not None and not sync.done():
            sync.set_result(SyncResult("UNKNOWN_MEMBER_ID"))
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self._prepare_rebalance(group, initial=False)
            else:
                group.empty(self.clock())
                group.generation += 1
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_CHECK_S)
            now = self.clock()
            for group in list(self.groups.values()):
                waiting = set(self._joins.get(group.group_id, {})) | set(self._syncs.get(group.group_id, {}))
                for member_id in lapsed_members(group, now, waiting):
                    logger.info("group %s: member %s let its session lapse; it leaves the group", group.group_id,
                                member_id)
                    self._remove(group, member_id)

    # -- offsets ------------------------------------------------------------------------------------
    async def commit(self, group_id: str, generation: int, member_id: str,
                     offsets: Sequence[tuple[TopicPartition, int, int, str | None]]) -> dict[TopicPartition, str]:
        """(partition, offset, leader epoch, metadata) each; the error name per partition."""
        coordinated = await self.coordinating(group_id)
        refusal = self._commit_refusal(group_id, generation, member_id) if coordinated == NONE else coordinated
        if refusal is not None:
            return {tp: refusal for tp, _, _, _ in offsets}
        now = self.clock()
        accepted: dict[TopicPartition, CommittedOffset] = {}
        errors: dict[TopicPartition, str] = {}
        for tp, offset, epoch, metadata in offsets:
            if metadata is not None and len(metadata.encode()) > self.metadata_max_bytes:
                errors[tp] = "OFFSET_METADATA_TOO_LARGE"
            else:
                accepted[tp] = CommittedOffset(offset, epoch, metadata or "", now)
        if accepted:
            try:
                if self.placement.create_topic:
                    await self._ensure_offsets_topic()
                await self._append(group_id, [(offset_key(group_id, tp), offset_value(c))
                                              for tp, c in accepted.items()], now)
            except StratalogError as error:
                logger.warning("group %s: committing offsets failed: %s", group_id, error)
                return {**{tp: "COORDINATOR_NOT_AVAILABLE" for tp in accepted}, **errors}
            self.offsets.setdefault(group_id, {}).update(accepted)
        return {**{tp: NONE for tp in accepted}, **errors}

    async def _append(self, group_id: str, entries: list[tuple[bytes, bytes | None]], now: int) -> None:
        """Commit records (key, value; a None value is a tombstone) to the group's offsets partition.
        Among replicas they are acknowledged once the ISR has them (Kafka commits with acks=-1); a
        lone engine's only copy is in its log."""
        partition = self.led.partition_of(group_id)
        assert partition is not None   # coordinating: the topic's partitions are known
        acks = Acks.ALL if self.broker.replicas is not None else Acks.LEADER
        records = [Record(i, now, key, value) for i, (key, value) in enumerate(entries)]
        await self.broker.append_records(TopicPartition(OFFSETS_TOPIC, partition), [build_batch(records)], acks,
                                         now, internal=True)

    async def expire_offsets(self) -> int:
        """Kafka's offsets retention: the expired commits of the groups coordinated here are
        tombstoned in ``__consumer_offsets`` (so the cleaner removes them) and forgotten, and a
        group left with neither members nor offsets with them; how many commits were removed."""
        now = self.clock()
        removed = 0
        for group_id in [g for g in list(self.offsets) if self.led.led(g)]:
            group = self.groups.get(group_id)
            gone = expired_offsets(group, self.offsets.get(group_id, {}), now, self.retention_ms)
            if not gone:
                continue
            try:
                await self._append(group_id, [(offset_key(group_id, tp), None) for tp in gone], now)
            except StratalogError as error:   # the next round tries again
                logger.warning("group %s: removing expired offsets failed: %s", group_id, error)
                continue
            kept = self.offsets.get(group_id, {})
            for tp in gone:
                kept.pop(tp, None)
            if not kept:
                self.offsets.pop(group_id, None)
                if group is not None and not group.members:
                    self.groups.pop(group_id, None)   # Kafka's Dead: nothing of it is left
            removed += len(gone)
            logger.info("group %s: %d committed offset(s) expired (offsets.retention.minutes)", group_id, len(gone))
        return removed

    async def _retain_offsets(self) -> None:
        while True:
            await asyncio.sleep(self.retention_check_s)
            try:
                await self.expire_offsets()
            except Exception as error:  # noqa: BLE001 - a bug here must not end the task for good
                logger.error("offsets retention failed: %s: %s", type(error).__name__, error)

    def _commit_refusal(self, group_id: str, generation: int, member_id: str) -> str | None:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.EMPTY:
            # Commits from outside any generation (a consumer that only assigns, or an admin tool) are
            # for groups without members.
            return None if generation < 0 else ("ILLEGAL_GENERATION" if group is not None else "UNKNOWN_MEMBER_ID")
        if member_id not in group.members:
            return "UNKNOWN_MEMBER_ID"
        if generation != group.generation:
            return "ILLEGAL_GENERATION"
        if group.state is GroupState.COMPLETING_REBALANCE:
            return "REBALANCE_IN_PROGRESS"
        group.members[member_id].last_heartbeat_ms = self.clock()
        return None

    async def _ensure_offsets_topic(self) -> None:
        if self._offsets_topic_made:
            return

        def make() -> None:   # on the pool: listing topics waits for the manager's lock
            if OFFSETS_TOPIC not in self.broker.engine.manager.topics():
                try:
                    self.broker.topics.create_topic(OFFSETS_TOPIC, self.placement.partition_count() or 1,
                                                    {"cleanup.policy": "compact", "segment.bytes": 104857600})
                except TopicExistsError:
                    pass

        await self.broker.run(make)
        self._offsets_topic_made = True

    async def committed(self, group_id: str, partitions: Sequence[TopicPartition] | None
                        ) -> dict[TopicPartition, CommittedOffset | None] | str:
        """The group's committed offsets (of ``partitions``, or all); the error name when not coordinated here."""
        refusal = await self.coordinating(group_id)
        if refusal != NONE:
            return refusal
        known = self.offsets.get(group_id, {})
        if partitions is None:
            return dict(known)
        return {tp: known.get(tp) for tp in partitions}

    # -- ListGroups, DescribeGroups -----------------------------------------------------------------
    async def list_groups(self) -> list[Group]:
        """The groups coordinated here with members or with committed offsets (the latter as Empty)."""
        await self.led.load_led()
        names = [g for g in sorted(set(self.groups) | set(self.offsets)) if self.led.led(g)]
        return [self.groups.get(name) or Group(name) for name in names]

    async def describe(self, group_id: str) -> Group | str | None:
        """The group (None: unknown here); the error name when not coordinated here."""
        refusal = await self.coordinating(group_id)
        if refusal != NONE:
            return refusal
        group = self.groups.get(group_id)
        if group is None and group_id in self.offsets:
            return Group(group_id)
        return group

