"""Consumer groups: Kafka's classic group coordinator, and committed offsets in ``__consumer_offsets``.

``group`` holds a group's members and the pure decisions of a rebalance; ``coordinator`` runs the
join, sync, heartbeat and leave protocol on the event loop; ``offsets_records`` is the byte
format of the committed offsets in ``__consumer_offsets``, as Kafka writes them.
"""
