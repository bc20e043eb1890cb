"""Maintenance triggers, status, health and metrics endpoints.

With ``--no-schedule`` the engine runs nothing by itself and an outside
scheduler (cron, the Kubernetes agent) drives it through these POSTs; with the
schedule on they still work, for an operator who wants a pass now. Each calls
the ``Engine`` task method the in-process schedule calls, on the maintenance
pool (the engine runs one task at a time), and answers with what it did.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from stratalog import __version__
from stratalog.server import params
from stratalog.server.metrics import CONTENT_TYPE
from stratalog.server.state import ServerState, state_of



def _topic_filter(request: web.Request, state: ServerState) -> str | None:
    topic = params.query_topic(request)
    if topic is not None:
        state.broker.topics.describe_topic(topic)  # an unknown topic is a 404, not an empty pass
    return topic


async def retention(request: web.Request) -> web.Response:
    state = state_of(request)
    topic = _topic_filter(request, state)
    done = await state.run_maintenance(state.engine.run_retention, topic)
    logs = state.engine.manager.logs()
    deletions = []
    for tp, deletion in done:
        log = logs.get(tp)
        deletions.append({"topic": tp.topic, "partition": tp.partition, "baseOffset": deletion.base_offset,
                          "size": deletion.size, "reason": deletion.reason, "detail": deletion.detail,
                          "logStartOffset": log.log_start_offset if log is not None else None})
    return web.json_response({"segmentsDeleted": len(deletions), "deletions": deletions})


async def clean(request: web.Request) -> web.Response:
    state = state_of(request)
    force = params.query_bool(request, "force", False)  # every parameter is parsed before any lookup
    topic = _topic_filter(request, state)

    def run() -> list[dict[str, object]]:
        # The same fields ``stratalog compact`` prints for a local pass.
        return [report.to_dict() for report in state.engine.run_cleaner(topic=topic, force=force)]

    reports = await state.run_maintenance(run)
    return web.json_response({"logsCleaned": len(reports), "reports": reports})


async def checkpoints(request: web.Request) -> web.Response:
    state = state_of(request)
    return web.json_response(await state.run_maintenance(state.engine.write_checkpoints))


async def flush(request: web.Request) -> web.Response:
    """Flush logs past ``flush.ms`` (the scheduled task), or every log with ``?all=true``."""
    state = state_of(request)
    everything = params.query_bool(request, "all", False)

    def run() -> list[dict[str, Any]]:
        if not everything:
            flushed = state.engine.flush_dirty_logs()
        else:
            flushed = []
            for tp, log in sorted(state.engine.manager.logs().items()):
                if log.unflushed_messages() > 0:
                    log.flush()
                    flushed.append(tp)
        return [{"topic": tp.topic, "partition": tp.partition} for tp in flushed]

    flushed = await state.run_maintenance(run)
    return web.json_response({"flushed": flushed, "count": len(flushed)})


async def deletions(request: web.Request) -> web.Response:
    state = state_of(request)
    return web.json_response(await state.run_maintenance(state.engine.delete_expired))


# -- status, health, metrics ------------------------------------------------------------------
def status_document(state: ServerState) -> dict[str, Any]:
    engine = state.engine
    doc: dict[str, Any] = {"version": __version__, "ready": state.ready, "started": state.started,
                           "draining": state.draining, "schedule": engine.schedule,
                           "limits": {"maxFetchWaitMs": state.settings.max_fetch_wait_ms,
                                      "maxFetchBytes": state.settings.max_fetch_bytes,
                                      "maxPartitionsPerTopic": state.settings.max_partitions_per_topic},
                           "tasks": {name: {"runs": t.runs, "lastRunMs": t.last_run_ms, "lastError": t.last_error}
                                     for name, t in sorted(engine.tasks.items())}}
    if not engine.ready:
        doc["dataDirs"] = [{"path": str(p)} for p in engine.manager.data_dirs]
        return doc
    manager = engine.manager
    logs = manager.logs()
    clean = manager.had_clean_shutdown()
    dirs = []
    offline = manager.offline_dirs()
    for path in manager.data_dirs:
        failure = offline.get(path)
        dirs.append({"path": str(path), "hadCleanShutdown": clean.get(path, False),
                     "partitions": sum(1 for log in logs.values() if log.dir.parent == path),
                     "online": failure is None, "error": failure.describe() if failure else None})
    recovered: list[dict[str, Any]] = []
    segments_recovered = 0
    for tp, report in sorted(manager.load_reports.items()):
        if tp not in logs:
            continue
        segments_recovered += len(report.recovered_segments)
        if report.recovered_segments or report.truncated_bytes or report.rebuilt_indexes or report.completed_swaps:
            recovered.append({"topic": tp.topic, "partition": tp.partition,
                              "recoveredSegments": report.recovered_segments,
                              "truncatedBytes": report.truncated_bytes, "rebuiltIndexes": report.rebuilt_indexes,
                              "completedSwaps": report.completed_swaps,
                              "deletedSegmentsAfterCorruption": report.deleted_segments_after_corruption})
    doc["dataDirs"] = dirs
    doc["partitions"] = len(logs)
    doc["recovery"] = {"recoveredSegments": segments_recovered, "partitions": recovered}
    return doc


async def status(request: web.Request) -> web.Response:
    state = state_of(request)
    return web.json_response(await state.run(status_document, state))


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "alive"})


async def readyz(request: web.Request) -> web.Response:
    state = state_of(request)
    if state.ready:
        # Kafka's broker keeps serving its other directories when one goes offline, so does the
        # engine: ready while one is online, with the offline ones named; 503 once none is.
        offline = state.engine.offline_dirs()
        if not offline:
            return web.json_response({"status": "ready"})
        detail = [o.describe() for o in offline.values()]
        if len(offline) < len(state.engine.manager.data_dirs):
            return web.json_response({"status": "ready", "offlineLogDirs": detail})
        return web.json_response({"error_code": "KAFKA_STORAGE_ERROR",
                                  "message": "not ready: every log directory is offline: " + "; ".join(detail)},
                                 status=503)
    reason = "shutting down" if state.draining else "opening data directories"
    return web.json_response({"error_code": "BROKER_NOT_AVAILABLE", "message": f"not ready: {reason}"},
                             status=503)


async def metrics(request: web.Request) -> web.Response:
    state = state_of(request)
    body = await state.run(state.metrics.render)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
