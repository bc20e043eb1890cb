"""Status writes by server-side apply, one field manager per writer.

The controller and every agent write into the same ``status`` (conditions are a list-map
keyed by ``type``, LogDir volumes a list-map keyed by ``name``, a Topic's per-LogDir
figures a map keyed by LogDir). Server-side apply merges those by key and tracks which
manager owns which entry, so one writer can never clobber another's entries; a merge
patch would replace whole lists. A write is skipped when the desired fragment is
already there, so a steady state costs no writes at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .kube import Kube, is_subset

__all__ = ["apply_status", "APPLY"]

APPLY = "application/apply-patch+yaml"


def apply_status(kube: Kube, body: Mapping[str, Any], fragment: Mapping[str, Any], *, manager: str,
                 force_check: bool = False) -> bool:
    """Apply ``fragment`` as ``status`` of ``body`` under field manager ``manager``.

    Returns whether a request was made (False: the status already says this).
    """
    current = body.get("status") or {}
    if not force_check and is_subset(dict(fragment), current):
        return False
    meta = body["metadata"]
    # Watch events can hand us a body from before our own last write; the memo keeps us from
    # writing the same fragment again (the periodic resync clears it, to repair drift).
    memo_key = (body["kind"], meta["namespace"], meta["name"], meta.get("uid"), manager)
    text = json.dumps(fragment, sort_keys=True)
    if not force_check and kube.applied.get(memo_key) == text:
        return False
    patch = {"apiVersion": body["apiVersion"], "kind": body["kind"],
             "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
             "status": dict(fragment)}
    path = kube.path(body["kind"], meta["namespace"], meta["name"], "status")
    kube.request("PATCH", path, patch, content_type=APPLY, query={"fieldManager": manager, "force": "true"})
    kube._wrote("apply-status", body["kind"])
    kube.applied[memo_key] = text
    return True
