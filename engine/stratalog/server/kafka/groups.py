"""The group APIs over Kafka's protocol: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, ListGroups and DescribeGroups, each a call to the broker's ``GroupCoordinator``.

FindCoordinator names the broker the ``ClusterView`` says coordinates the group (a lone engine:
itself; among replicas, the leader of the group's ``__consumer_offsets`` partition), or refuses
with the view's reason. A request for a group this engine does not coordinate is answered
NOT_COORDINATOR by the coordinator, as a Kafka broker does. Transactions have no coordinator
here: FindCoordinator for one is refused with INVALID_REQUEST and a message saying so.
"""

from __future__ import annotations

from typing import Any

from stratalog.broker.groups.group import GroupState
from stratalog.common.errors import StratalogError
from stratalog.server.kafka.codec import AUTHORIZED_OPERATIONS_OMITTED, Request, code_named, error_code, field, millis
from stratalog.server.kafka.context import KafkaContext

GROUP_KEY = 0
CONSUMER_PROTOCOL = "consumer"


async def find_coordinator(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    keys = field(body, "coordinator_keys") or [field(body, "key", "")]
    key_type = field(body, "key_type", GROUP_KEY)
    found = []
    for key in keys:
        if key_type == GROUP_KEY:
            try:
                node = await ctx.broker.run(ctx.view.group_coordinator, key)
            except StratalogError as error:
                found.append({"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error_code(error),
                              "error_message": str(error)})
                continue
            found.append({"key": key, "node_id": node.node_id, "host": node.host, "port": node.port,
                          "error_code": 0, "error_message": None})
        else:
            found.append({"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code_named("INVALID_REQUEST"),
                          "error_message": "transactions are not supported: this engine has no transaction "
                                           "coordinator"})
    first = found[0]
    return {"throttle_time": 0, "coordinators": found, "error_code": first["error_code"],
            "error_message": first["error_message"], "node_id": first["node_id"], "host": first["host"],
            "port": first["port"]}


async def join_group(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    session = millis(body.session_timeout)
    rebalance = millis(field(body, "rebalance_timeout", body.session_timeout))
    result = await ctx.groups.join(body.group_id, body.member_id, request.client_id or "", request.client_host,
                                   session, rebalance, body.protocol_type,
                                   [(p.name, bytes(p.metadata)) for p in body.protocols],
                                   require_known_member=request.api_version >= 4)
    return {"throttle_time": 0, "error_code": code_named(result.error), "generation_id": result.generation,
            "protocol_type": result.protocol_type, "protocol_name": result.protocol or "",
            "leader": result.leader, "skip_assignment": False, "member_id": result.member_id,
            "members": [{"member_id": m, "group_instance_id": None, "metadata": meta} for m, meta in result.members]}


async def sync_group(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    result = await ctx.groups.sync(body.group_id, body.generation_id, body.member_id,
                                   [(a.member_id, bytes(a.assignment)) for a in body.assignments])
    return {"throttle_time": 0, "error_code": code_named(result.error), "protocol_type": result.protocol_type,
            "protocol_name": result.protocol, "assignment": result.assignment}


async def heartbeat(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    answer = await ctx.groups.heartbeat(body.group_id, body.generation_id, body.member_id)
    return {"throttle_time": 0, "error_code": code_named(answer)}


async def leave_group(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    members = field(body, "members")

    async def leave(member_id: str) -> int:
        return code_named(await ctx.groups.leave(body.group_id, member_id))

    if members is None:   # v0-2: one member
        return {"throttle_time": 0, "error_code": await leave(body.member_id)}
    answers = [{"member_id": m.member_id, "group_instance_id": field(m, "group_instance_id"),
                "error_code": await leave(m.member_id)} for m in members]
    return {"throttle_time": 0, "error_code": 0, "members": answers}


async def list_groups(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    wanted = {s.lower() for s in field(request.body, "states_filter") or ()}
    groups = [g for g in await ctx.groups.list_groups() if not wanted or g.state.value.lower() in wanted]
    return {"throttle_time": 0, "error_code": 0,
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type or CONSUMER_PROTOCOL,
                        "group_state": g.state.value, "group_type": "classic"} for g in groups]}


async def describe_groups(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    described = []
    for group_id in request.body.groups:
        group = await ctx.groups.describe(group_id)
        if isinstance(group, str):
            described.append(_not_coordinated(group_id, group))
            continue
        if group is None:
            described.append({"error_code": 0, "group_id": group_id, "group_state": GroupState.DEAD.value,
                              "protocol_type": "", "protocol_data": "", "members": [],
                              "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        settled = group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE)
        described.append({
            "error_code": 0, "group_id": group_id, "group_state": group.state.value,
            "protocol_type": group.protocol_type or "", "protocol_data": (group.protocol or "") if settled else "",
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            "members": [{"member_id": m.member_id, "group_instance_id": None, "client_id": m.client_id,
                         "client_host": m.client_host, "member_metadata": m.metadata_for(group.protocol),
                         "member_assignment": m.assignment if group.state is GroupState.STABLE else b""}
                        for m in group.members.values()]})
    return {"throttle_time": 0, "groups": described}


def _not_coordinated(group_id: str, error: str) -> dict[str, Any]:
    return {"error_code": code_named(error), "group_id": group_id, "group_state": "",
            "protocol_type": "", "protocol_data": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
