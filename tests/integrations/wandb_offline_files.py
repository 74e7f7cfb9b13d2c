"""Reads W&B's offline run files (``run-<id>.wandb``): W&B's LevelDB-style record log of
``wandb_internal_pb2.Record`` protobufs, read with W&B's own protobuf classes."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

_FILE_HEADER = 7  # b":W&B", a 2-byte magic, a version byte
_BLOCK = 32768
_RECORD_HEADER = 7  # crc32 (4), length (2), type (1)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> list[bytes]:
    assert data[:4] == b":W&B", data[:8]
    out: list[bytes] = []
    pending = b""
    pos = _FILE_HEADER
    while pos + _RECORD_HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _RECORD_HEADER:
            pos += left  # the block's padding
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _RECORD_HEADER])
        body = data[pos + _RECORD_HEADER:pos + _RECORD_HEADER + length]
        pos += _RECORD_HEADER + length
        if kind == 0 and length == 0:
            break
        if kind == _FULL:
            out.append(body)
        elif kind == _FIRST:
            pending = body
        elif kind == _MIDDLE:
            pending += body
        elif kind == _LAST:
            out.append(pending + body)
            pending = b""
    return out


@dataclass
class OfflineRun:
    """What one offline run recorded."""

    run_id: str = ""
    name: str = ""
    group: str = ""
    project: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int | None = None
    artifacts: list[str] = field(default_factory=list)


def read_run(path: Path) -> OfflineRun:
    run = OfflineRun()
    for payload in _payloads(path.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.run_id, run.name = record.run.run_id, record.run.display_name
            run.group, run.project = record.run.run_group, record.run.project
            for item in record.run.config.update:
                run.config[item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                run.config[item.key] = json.loads(item.value_json)
        elif kind == "history":
            run.history.append({
                ".".join(item.nested_key) or item.key: json.loads(item.value_json)
                for item in record.history.item
            })
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
        elif kind == "artifact":
            run.artifacts.append(record.artifact.name)
    return run


def offline_runs(folder: Path) -> list[OfflineRun]:
    """Every offline run under ``folder`` (its ``wandb/offline-run-*`` folders)."""
    return [read_run(p) for p in sorted(folder.rglob("offline-run-*/run-*.wandb"))]
