"""Trials that the journal lost, found again in the experiment folder.

The journal is the experiment's record (see :mod:`._experiment_state`), but a damaged one
(empty, cut back to its first lines, or missing lines after a machine crash) must not make a
restore run finished work again over the results it left. So every trial folder the journal
does not name, whose name carries the experiment's trial-id tag, is rebuilt from what is on
disk:

- its id from its results (``trial_id``) or its folder's name, its config from
  ``params.pkl`` (``params.json`` when there is none);
- its checkpoints from the ``checkpoint_dir_name`` of its results whose folder still exists,
  with the sizes the result logs had at each (leftover ``.tmp`` folders are not checkpoints);
- its end: ``ERROR`` when it left an ``error.txt``. Without one, the folder cannot say whether
  the trial finished or was cut off: one with a checkpoint resumes from its latest (Ray's
  rule for unfinished trials; a trial that had finished ends at once), one with results but
  no checkpoint is kept as it is, ``TERMINATED``, since running it again would replace its
  results; one without results runs again.

A warning names the trials so recovered.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from typing import Any

import cloudpickle

from ..._shared._storage_path import check_experiment_dir, open_experiment_file
from ..experiment.trial import ERROR, TERMINATED
from ._experiment_state import JournalCheckpoint, JournalState, TrialRecord
from ._storage import PROGRESS_FILE, RESULT_FILE

__all__ = ["PARAMS_PICKLE", "recover_lost_trials"]

logger = logging.getLogger("actorrt.tune")

PARAMS_PICKLE = "params.pkl"


def recover_lost_trials(
    folder: str, tag: str, journal: JournalState, keep: Any
) -> list[TrialRecord]:
    """Add to ``journal`` the trials found in ``folder`` that it does not name; return them.

    Args:
        folder: the experiment folder.
        tag: the experiment's trial-id tag (trial ids are ``<tag>_<5 digits>``).
        journal: the folded journal, changed in place.
        keep: the run's ``CheckpointConfig`` (how checkpoints are scored), or ``None``.
    """
    known = {r.dirname for r in journal.trials} | {r.trial_id for r in journal.trials}
    pattern = re.compile(rf"{re.escape(tag)}_\d{{5}}")
    found: list[TrialRecord] = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name in known or not os.path.isdir(path):
            continue
        if not any(os.path.isfile(os.path.join(path, f)) for f in ("params.json", PARAMS_PICKLE)):
            continue
        check_experiment_dir(path, "the trial folder")  # its params.pkl is unpickled
        results = _results(path)
        trial_id = next((r["trial_id"] for r in results if isinstance(r.get("trial_id"), str)), "")
        match = pattern.search(trial_id) or pattern.search(name)
        if match is None or match.group(0) in known:
            continue
        record = TrialRecord(
            trial_id=match.group(0),
            trial_name=str(next((r["trial_name"] for r in results if "trial_name" in r), name)),
            dirname=name,
            config=_config(path),
        )
        record.checkpoints = _checkpoints(path, results, keep)
        error = os.path.join(path, "error.txt")
        if os.path.isfile(error):
            record.status = ERROR
            with open(error, encoding="utf-8", errors="replace") as f:
                record.error_text = f.read()
            last = record.error_text.strip().splitlines()[-1:] or [""]
            record.error_type = last[0].split(":")[0]
        elif results and not record.checkpoints:
            record.status = TERMINATED
        found.append(record)
    if found:
        found.sort(key=lambda r: r.trial_id)
        journal.trials.extend(found)
        journal.trials.sort(key=lambda r: r.trial_id)
        logger.warning(
            "tune: the journal of %s does not name %d trial folder(s); recovered from their "
            "files: %s (with an error.txt: errored; with a checkpoint: resumed from the latest; "
            "with results only: kept as they are)",
            folder, len(found), ", ".join(r.dirname for r in found),
        )
    return found


def _results(path: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        with open(os.path.join(path, RESULT_FILE), "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return out
    offset = 0
    for line in raw.split(b"\n"):
        offset += len(line) + 1
        if not line.strip():
            continue
        try:
            result = json.loads(line)
        except ValueError:
            break  # a torn or damaged line: what came before is kept
        if isinstance(result, dict):
            result["__end"] = min(offset, len(raw))
            out.append(result)
    return out


def _config(path: str) -> dict[str, Any]:
    try:
        pickled = open_experiment_file(os.path.join(path, PARAMS_PICKLE), "the trial's config")
    except FileNotFoundError:
        pickled = None
    if pickled is not None:
        with pickled:
            try:
                config = cloudpickle.load(pickled)
                if isinstance(config, dict):
                    return config
            except Exception:  # written by code that is not importable here
                pass
    with open(os.path.join(path, "params.json"), encoding="utf-8", errors="replace") as f:
        loaded = json.load(f)
    return loaded if isinstance(loaded, dict) else {}


def _progress_ends(path: str) -> list[int]:
    """The size of ``progress.csv`` after its header and after each row."""
    try:
        with open(os.path.join(path, PROGRESS_FILE), "rb") as f:
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return []
    ends, offset = [], 0
    for line in lines[:-1]:
        offset += len(line) + 1
        ends.append(offset)
    return ends


def _checkpoints(path: str, results: list[dict[str, Any]], keep: Any) -> list[JournalCheckpoint]:
    attr = getattr(keep, "checkpoint_score_attribute", None)
    minimize = getattr(keep, "checkpoint_score_order", "max") == "min"
    rows = _progress_ends(path)
    out: list[JournalCheckpoint] = []
    for index, result in enumerate(results):
        dirname = result.get("checkpoint_dir_name")
        if not isinstance(dirname, str) or not os.path.isdir(os.path.join(path, dirname)):
            continue
        if attr:
            score = float(result.get(attr, math.nan))
            score = -score if minimize else score
        else:
            score = float(len(out))
        out.append(
            JournalCheckpoint(
                dirname=dirname,
                score=score,
                iteration=int(result.get("training_iteration", 0)),
                time_total_s=float(result.get("time_total_s", 0.0)),
                result_bytes=int(result["__end"]),
                progress_bytes=rows[index + 1] if index + 1 < len(rows) else 0,
            )
        )
    return out
