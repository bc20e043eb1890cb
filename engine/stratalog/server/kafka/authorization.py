"""What each Kafka API needs of the connection's principal, and the per-topic check.

    Produce                                         produce on each topic
    Fetch, ListOffsets, OffsetsForLeaderEpoch,
    OffsetCommit, OffsetFetch                       consume on each topic
    Fetch, ListOffsets with a replica id            replicate on each topic (a follower's)
    CreateTopics, DeleteTopics, CreatePartitions,
    IncrementalAlterConfigs (topics)                administer on each topic
    everything else (Metadata, the group
    membership APIs, DescribeConfigs, ...)          an authenticated principal

A topic the principal may not use is answered with TOPIC_AUTHORIZATION_FAILED in its own
entry, as Kafka does; the rest of the request goes on. OffsetFetch of all a group's topics
leaves out those the principal may not consume. Groups have no Kubernetes resource, so group
membership needs only authentication; what a member reads or commits is checked per topic.
"""

from __future__ import annotations

from collections.abc import Iterable

from stratalog.common.errors import TopicAuthorizationFailedError
from stratalog.server.access.model import Verb
from stratalog.server.kafka.codec import Request
from stratalog.server.kafka.context import KafkaContext

__all__ = ["Verb", "refused", "refused_topics"]


async def refused(ctx: KafkaContext, request: Request, verb: Verb, topic: str
                  ) -> TopicAuthorizationFailedError | None:
    """The refusal of ``verb`` on ``topic`` for this request's principal, or None when allowed."""
    return (await refused_topics(ctx, request, verb, [topic])).get(topic)


async def refused_topics(ctx: KafkaContext, request: Request, verb: Verb, topics: Iterable[str]
                         ) -> dict[str, TopicAuthorizationFailedError]:
    if not ctx.access.enabled:
        return {}
    return await ctx.access.denied(request.principal, verb, topics, f"Kafka API {request.api_key}")
