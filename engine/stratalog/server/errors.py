"""Engine errors as HTTP responses: ``{"error_code": <Kafka error name>, "message": ...}``.

Clients of the API already speak Kafka's error names (the engine raises them,
the CLI prints them), so the body carries the engine error's ``code``
unchanged and the HTTP status only says who is at fault:

=====  ==========================================================================
400    the request: ``INVALID_*``, ``CORRUPT_MESSAGE``, ``MESSAGE_TOO_LARGE``,
       ``RECORD_LIST_TOO_LARGE``, and ``INVALID_REQUEST`` for a malformed request
       (bad JSON, a wrong type, a bad path or query parameter; the message names it)
404    ``UNKNOWN_TOPIC_OR_PARTITION`` (and ``INVALID_REQUEST`` for an unknown route)
405    ``INVALID_REQUEST``: method not allowed on the route (with ``Allow``)
409    ``TOPIC_ALREADY_EXISTS``
413    ``MESSAGE_TOO_LARGE``: the body exceeds the server's limit before it is read
       (a batch within the limit but over the topic's ``max.message.bytes`` is a 400)
415    ``INVALID_REQUEST``: a body media type the operation does not take
409    ``FENCED_LEADER_EPOCH``, ``UNKNOWN_LEADER_EPOCH``, ``INVALID_UPDATE_VERSION``,
       ``INELIGIBLE_REPLICA``: the request's view of the replication state is out of date
416    ``OFFSET_OUT_OF_RANGE``: the offset is outside [log start, log end]; a distinct
       status lets a consumer reset without parsing the body
421    ``NOT_LEADER_OR_FOLLOWER``: this engine does not lead the partition (Misdirected
       Request); the message names its leader and where it is
500    ``KAFKA_STORAGE_ERROR`` / ``UNKNOWN_SERVER_ERROR``: the server's fault, never
       the consequence of bad input
503    ``BROKER_NOT_AVAILABLE``: the engine is still recovering or is shutting down;
       ``NOT_ENOUGH_REPLICAS`` (``_AFTER_APPEND``): too few in-sync replicas, retry later
504    ``REQUEST_TIMED_OUT``: acks=all, the in-sync replicas did not all have it in time
=====  ==========================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web

from stratalog.common.errors import StratalogError
from stratalog.server.api_request import ApiRequest

logger = logging.getLogger(__name__)

JSON_ERROR_CODES_400 = frozenset({"CORRUPT_MESSAGE", "MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"})

_STATUS_BY_CODE = {
    "UNKNOWN_TOPIC_OR_PARTITION": 404,
    "TOPIC_ALREADY_EXISTS": 409,
    "OFFSET_OUT_OF_RANGE": 416,
    "BROKER_NOT_AVAILABLE": 503,
    "NOT_LEADER_OR_FOLLOWER": 421,
    "NOT_ENOUGH_REPLICAS": 503,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 503,
    "REQUEST_TIMED_OUT": 504,
    "FENCED_LEADER_EPOCH": 409,
    "UNKNOWN_LEADER_EPOCH": 409,
    "INVALID_UPDATE_VERSION": 409,
    "INELIGIBLE_REPLICA": 409,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 409,
    "KAFKA_STORAGE_ERROR": 500,
    "UNKNOWN_SERVER_ERROR": 500,
    "SASL_AUTHENTICATION_FAILED": 401,
    "TOPIC_AUTHORIZATION_FAILED": 403,
    "CLUSTER_AUTHORIZATION_FAILED": 403,
}


class RequestError(StratalogError):
    """A malformed request: the message names the field, parameter or header at fault."""

    code = "INVALID_REQUEST"

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class BodyTooLargeError(StratalogError):
    """The body is over the server's limit; refused before it is buffered."""

    code = "MESSAGE_TOO_LARGE"
    status = 413


class NotReadyError(StratalogError):
    code = "BROKER_NOT_AVAILABLE"


def status_for(error: StratalogError) -> int:
    explicit = getattr(error, "status", None)
    if isinstance(explicit, int):
        return explicit
    code = error.code
    if code in _STATUS_BY_CODE:
        return _STATUS_BY_CODE[code]
    if code.startswith("INVALID_") or code in JSON_ERROR_CODES_400:
        return 400
    return 500


def error_response(status: int, code: str, message: str, *, headers: dict[str, str] | None = None,
                   details: dict[str, object] | None = None) -> web.Response:
    return web.json_response({"error_code": code, "message": message, **(details or {})}, status=status,
                             headers=headers)


ErrorListener = Callable[[str], None]


def error_answer(request: ApiRequest, error: Exception, on_error: ErrorListener) -> web.Response:
    """The JSON error response for what a handler raised, counted by its code; re-raises an aiohttp
    redirect or other answer below 400, which is not a failure."""
    if isinstance(error, StratalogError):
        on_error(error.code)
        status = status_for(error)
        challenge = {"WWW-Authenticate": 'Bearer realm="stratalog"'} if status == 401 else None
        return error_response(status, error.code, str(error), headers=challenge, details=error.details())
    if isinstance(error, web.HTTPException):
        # aiohttp's own refusals (no route, wrong method): same JSON shape, same status,
        # keeping headers such as Allow that the status promises.
        if error.status < 400:
            raise error
        on_error("INVALID_REQUEST")
        headers = {k: v for k, v in error.headers.items() if k.lower() in ("allow",)}
        reason = error.reason or "error"
        message = f"{request.method} {request.path}: {reason.lower()}"
        return error_response(error.status, "INVALID_REQUEST", message, headers=headers)
    # The last line of defence: log it, answer 500.
    logger.error("unexpected error serving %s %s", request.method, request.path, exc_info=error)
    on_error("UNKNOWN_SERVER_ERROR")
    return error_response(500, "UNKNOWN_SERVER_ERROR", f"{type(error).__name__}: {error}")
