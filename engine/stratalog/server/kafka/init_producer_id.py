"""InitProducerId: an id and epoch 0 for an idempotent producer; transactions are refused.

Without a transactional id, Kafka's coordinator gives every call a new producer id (also when
the client names its current one to bump its epoch, KIP-360), as this does. A transactional id
needs a transaction coordinator, which the engine does not have yet: INVALID_REQUEST. (Java's
transactional producer asks FindCoordinator first, which is not offered, and stops there.)
"""

from __future__ import annotations

from typing import Any

from stratalog.common.errors import StratalogError
from stratalog.server.kafka.codec import Request, code_named, error_code
from stratalog.server.kafka.context import KafkaContext



async def handle(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    refused = {"throttle_time": 0, "producer_id": -1, "producer_epoch": -1}
    if request.body.transactional_id is not None:
        return {**refused, "error_code": code_named("INVALID_REQUEST")}
    try:
        producer_id = await ctx.broker.run(ctx.producer_ids.generate)
    except StratalogError as error:
        return {**refused, "error_code": error_code(error)}
    return {"throttle_time": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
