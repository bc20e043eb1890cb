"""``verify``: every segment of a topic checked in parallel, one Spark task per segment.

A task runs the engine's own checker (``stratalog.storage.inspect.checks.check_segment``:
every batch's CRC and structure, offsets against the segment's base, the
offset and time indexes against the log), reading through a read-only
mapping and without the directory lock, so it can run beside a live engine.
The driver then checks what no single segment can see: that offsets keep
increasing from one segment to the next. A segment that retention or the
cleaner removes while the job runs is reported as gone, not as an error.

The last segment of a partition is the active one; against a live engine,
a finding at its very end can be a batch being written at that moment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from stratalog.storage.inspect.checks import check_segment

from ..store.directory import DirStore
from ..store.segments import list_segments


@dataclass(frozen=True)
class SegmentTask:
    topic: str
    partition: int
    base_offset: int
    path: str
    active: bool


def segment_tasks(paths: list[str], topic: str) -> list[SegmentTask]:
    store = DirStore(paths)
    tasks = []
    for partition in store.partitions(topic):
        segments = list_segments(store.partition_dir(topic, partition))
        for index, segment in enumerate(segments):
            tasks.append(SegmentTask(topic, partition, segment.base_offset, str(segment.path),
                                     index == len(segments) - 1))
    return tasks


def check_one(task: SegmentTask) -> dict[str, Any]:
    """Runs in a task: the segment's findings as plain data."""
    result: dict[str, Any] = {"topic": task.topic, "partition": task.partition, "baseOffset": task.base_offset,
                              "path": task.path, "active": task.active, "gone": False, "bytes": 0, "batches": 0,
                              "records": 0, "firstOffset": None, "lastOffset": None, "findings": []}
    try:
        report = check_segment(Path(task.path), task.base_offset)
    except FileNotFoundError:
        result["gone"] = True  # deleted or replaced by retention / the cleaner since the listing
        return result
    result.update(bytes=report.size, batches=report.batches, records=report.records,
                  firstOffset=report.first_offset, lastOffset=report.last_offset,
                  findings=[f.to_json() for f in report.findings])
    return result


def continuity_findings(segments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Offsets must increase across a partition's segments (what ``stratalog verify`` checks in one pass)."""
    findings = []
    previous_last: int | None = None
    for segment in sorted(segments, key=lambda s: s["baseOffset"]):
        if segment["gone"]:
            continue
        if previous_last is not None and segment["baseOffset"] <= previous_last:
            findings.append({"severity": "error", "file": segment["path"], "position": None, "entry": None,
                             "message": f"segment base offset {segment['baseOffset']} is not above the previous "
                                        f"segment's last offset {previous_last}"})
        elif previous_last is not None and segment["firstOffset"] is not None \
                and segment["firstOffset"] <= previous_last:
            findings.append({"severity": "error", "file": segment["path"], "position": 0, "entry": None,
                             "message": f"offsets go backwards: the segment starts at {segment['firstOffset']}, "
                                        f"not after the previous segment's last offset {previous_last}"})
        if segment["lastOffset"] is not None:
            previous_last = max(previous_last or -1, segment["lastOffset"])
    return findings


def verify_topic(spark: SparkSession, paths: list[str], topic: str) -> dict[str, Any]:
    tasks = segment_tasks(paths, topic)
    results = spark.sparkContext.parallelize(tasks, max(len(tasks), 1)).map(check_one).collect()
    partitions = []
    for partition in sorted({r["partition"] for r in results}):
        segments = [r for r in results if r["partition"] == partition]
        findings = [f for s in segments for f in s["findings"]] + continuity_findings(segments)
        partitions.append({
            "partition": partition, "segments": len(segments), "segmentsGone": sum(s["gone"] for s in segments),
            "batches": sum(s["batches"] for s in segments), "records": sum(s["records"] for s in segments),
            "bytes": sum(s["bytes"] for s in segments),
            "errors": sum(f["severity"] == "error" for f in findings),
            "warnings": sum(f["severity"] == "warning" for f in findings), "findings": findings})
    return {"topic": topic, "segments": len(tasks), "tasks": len(tasks),
            "records": sum(p["records"] for p in partitions), "bytes": sum(p["bytes"] for p in partitions),
            "errors": sum(p["errors"] for p in partitions), "warnings": sum(p["warnings"] for p in partitions),
            "partitions": partitions}


def print_report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
        return
    for partition in report["partitions"]:
        for finding in partition["findings"]:
            where = finding["file"] + (f" at byte {finding['position']}" if finding["position"] is not None else "")
            print(f"{finding['severity']}: {where}: {finding['message']}")
    verdict = "corrupt" if report["errors"] else "clean"
    print(f"{report['topic']}: {verdict}: {report['segments']} segments, {report['records']} records, "
          f"{report['bytes']} bytes; {report['errors']} errors, {report['warnings']} warnings")
