"""The data routes over HTTP/1.1 without aiohttp's per-request machinery.

Produce to and fetch from one partition (``/v1/topics/{topic}/partitions/{partition}/records``)
are nearly all of a busy server's requests. aiohttp spends more CPU on each of them (routing,
the middleware chain, its request and response objects, the task that writes the answer) than
the broker spends on the records (bench/README.md, "Service path"). Here a connection's requests
to those two routes are framed by ``framing`` (httptools checks each head), answered by the very
handlers and gate checks aiohttp's routes run, and written in one send. The first request that is
anything else, or anything unusual (chunked, ``Expect``, ``Upgrade``, a body over the limit, a head
httptools refuses), hands the connection to aiohttp for good, with its bytes untouched; aiohttp
then answers it and all that follows, errors included.
"""
