"""Kafka's wire protocol: a listener that Kafka clients use unchanged, beside the HTTP API.

A thin transport over the broker layer, as the HTTP server is: frames in (``codec``, through
kio's classes generated from Kafka's JSON schemas), one handler per API (``api_versions``,
``metadata``, ``produce``, ``fetch``, ``list_offsets``, ``init_producer_id``, ``groups``,
``group_offsets``), the same ``ReplicaManager`` calls the
HTTP routes make, frames out. ``listener`` owns the sockets.
"""
