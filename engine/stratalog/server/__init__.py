"""``stratalog serve``: the engine behind an HTTP API, with Kafka's schedule and Prometheus metrics.

The service is a thin asyncio shell around one ``stratalog.broker.engine.Engine``:
the event loop parses requests and waits (long polls), while every call that
can touch the disk (appends with or without fsync, reads, topic admin,
retention and cleaner passes) runs in a thread pool, so one slow fsync never
stalls the other requests. Nothing here knows the on-disk format; it only
calls the engine's public methods, so the API and the CLI can never disagree
about what an append or a fetch does.

Modules, by concern:

    errors       engine error -> HTTP status and the JSON error body
    params       path, query and body parsing that names the offending field
    state        what the handlers share: engine, thread pools, append signals, limits
    records      produce, fetch (long poll), list offsets, delete records
    topics       topic admin and per-partition statistics
    maintenance  retention / clean / checkpoint / flush / deletion triggers, status, health
    metrics      the private Prometheus registry and the engine collector
    openapi      the OpenAPI 3 document served at /v1/openapi.json
    app          the application factory: routes and middlewares
    run          the serve loop: listen, start the engine, drain on SIGTERM/SIGINT
"""
