"""What each request needs: no credential, any principal, or a verb on its topic or on every topic.

The HTTP route table (``server.app.ROUTES``) names one ``Need`` per route; the Kafka handlers
name theirs in ``server.kafka.authorization``. Kept apart from the checks so the tables read as
the documentation they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratalog.server.access.model import Verb


@dataclass(frozen=True)
class Need:
    verb: Verb | None       # None: any authenticated principal
    per_topic: bool = True  # the request's topic is the resource; False: every topic
    public: bool = False    # no credential at all (probes, metrics, the OpenAPI document)


PUBLIC = Need(None, per_topic=False, public=True)
AUTHENTICATED = Need(None, per_topic=False)
CONSUME = Need(Verb.CONSUME)
PRODUCE = Need(Verb.PRODUCE)
ADMINISTER = Need(Verb.ADMINISTER)
ADMINISTER_ALL = Need(Verb.ADMINISTER, per_topic=False)
REPLICATE = Need(Verb.REPLICATE)
REPLICATE_ALL = Need(Verb.REPLICATE, per_topic=False)
