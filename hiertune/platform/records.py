"""Tuning records: one JSON-lines file, appended and flushed as each measurement arrives.

Two kinds of line, so one file is self-contained and round-trips into a MetaSchedule database:

    {"kind": "workload", "task": "GMM-S", "weight": 1, "workload": <ms Workload.as_json()>}
    {"kind": "measure", "task": "GMM-S", "key": "...", "record": <ms TuningRecord.as_json()>,
     "latencies_s": [...] | null, "error": null | "...", "build_s": .., "run_s": .., "time": ..,
     "tuner": "harl" | "metaschedule", "trial": 7, "timing": "cold" | "warm", ...}

A killed writer can leave a torn last line: loading skips it with a warning, never fails.

One writer per file: a writing store holds an OS lock (flock) on `<records>.lock` for the life of
its process, so a second `hiertune tune --records same.jsonl` is refused at once, naming the
holder, instead of both appending trials with the same numbers. The kernel drops the lock when
the holder exits, killed or not, so a stale `.lock` file never blocks a resume.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import socket
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hiertune.errors import HiertuneError


class LatencyOutcome:
    """Shared by measurement results and records: latencies or an error, never both."""

    latencies_s: list[float] | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.latencies_s)

    @property
    def mean_s(self) -> float:
        """Mean latency; infinite for a failed candidate so it never wins a comparison."""
        return sum(self.latencies_s) / len(self.latencies_s) if self.ok else float("inf")


@dataclass
class MeasureRecord(LatencyOutcome):
    """One measured candidate as stored (the trace stays JSON until someone needs TVM objects)."""

    task: str
    key: str
    record: Any  # TuningRecord.as_json(): [trace, run_secs, target, args_info]
    latencies_s: list[float] | None
    error: str | None = None
    build_s: float = 0.0
    run_s: float = 0.0
    time: float = field(default_factory=time.time)
    tuner: str = ""
    trial: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = {
            "kind": "measure", "task": self.task, "key": self.key, "record": self.record,
            "latencies_s": self.latencies_s, "error": self.error, "build_s": round(self.build_s, 4),
            "run_s": round(self.run_s, 4), "time": round(self.time, 3), "tuner": self.tuner,
            "trial": self.trial,
        }
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MeasureRecord:
        known = {"kind", "task", "key", "record", "latencies_s", "error", "build_s", "run_s", "time", "tuner", "trial"}
        return cls(
            task=data["task"], key=data["key"], record=data["record"],
            latencies_s=data.get("latencies_s"), error=data.get("error"),
            build_s=data.get("build_s", 0.0), run_s=data.get("run_s", 0.0),
            time=data.get("time", 0.0), tuner=data.get("tuner", ""), trial=data.get("trial", 0),
            extra={k: v for k, v in data.items() if k not in known},
        )


# Locks this process holds, by resolved records path: several stores of one process may share a file.
_HELD_LOCKS: dict[Path, int] = {}


def lock_records(path: Path) -> None:
    """Take the one-writer lock of a records file for this process, or refuse naming its holder."""
    key = path.resolve()
    if key in _HELD_LOCKS:
        return
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise HiertuneError(
            f"--records {path} is being written by {holder}; wait for that run to finish "
            "or give this one another --records file"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()}\n".encode(), 0)
    _HELD_LOCKS[key] = fd


def tuning_record_json(record: Any) -> list[Any]:
    """`TuningRecord.as_json()`, except that an IndexMap in the trace (DLight's Matmul rule passes
    one to `transform_layout`) becomes its `tvm.ir.save_json` string, the form the trace's own JSON
    conversion writes and `TuningRecord.from_json` reads; MetaSchedule's record conversion has no
    case for it and raises. (The trace's own `as_json` cannot be reused here: it leaves IntImm
    objects, which `json.dumps` refuses.)"""
    from tvm.s_tir.meta_schedule import _ffi_api

    return _to_python(_ffi_api.TuningRecordAsJSON(record))


def _to_python(obj: Any) -> Any:
    import tvm
    from tvm.tirx import FloatImm, IndexMap, IntImm
    from tvm_ffi import Array, Map

    if obj is None or isinstance(obj, int | float | str):
        return obj
    if isinstance(obj, IntImm | FloatImm):
        return obj.value
    if isinstance(obj, Array):
        return [_to_python(item) for item in obj]
    if isinstance(obj, Map):
        return {_to_python(k): _to_python(v) for k, v in obj.items()}
    if isinstance(obj, IndexMap):
        return tvm.ir.save_json(obj)
    raise TypeError(f"a tuning record holds a {type(obj).__name__}, which has no JSON form here")


def trace_key(trace: Any) -> str:
    """A stable identity for a schedule: the hash of its trace (instructions and decisions)."""
    text = json.dumps(trace.as_json(remove_postproc=True), sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:20]


class RecordStore:
    """Append-only JSONL store of workloads and measurements, loaded back for resume and apply.

    `writer=False` opens it to read only (apply, compile): no lock, so a live run can be read.
    """

    def __init__(self, path: str | Path, writer: bool = True) -> None:
        self.path = Path(path)
        self.workloads: dict[str, dict[str, Any]] = {}
        self.measures: list[MeasureRecord] = []
        self._torn_tail = False
        self.timing: str | None = None  # stamped on appended trials once a runner is bound (expect_timing)
        if self.path.is_dir():
            raise HiertuneError(f"--records {self.path} is a directory; give a file path such as runs/gmm.jsonl")
        self.writer = writer
        if writer:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock_records(self.path)
        if self.path.exists():
            self._load()

    # ------------------------------------------------------------------ reading
    def _load(self) -> None:
        with self.path.open("r", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        # A torn last line has no newline: start the next record on a fresh line, or it is lost too.
        self._torn_tail = bool(lines) and not lines[-1].endswith("\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if data.get("kind") == "workload":
                    self.workloads[data["task"]] = data
                elif data.get("kind") == "measure":
                    self.measures.append(MeasureRecord.from_json(data))
                else:
                    raise ValueError(f"unknown kind {data.get('kind')!r}")
            except (json.JSONDecodeError, KeyError, ValueError, TypeError, AttributeError) as err:
                warnings.warn(
                    f"{self.path}:{number}: skipping a corrupt record line ({err}); "
                    "it was probably cut off when a run was killed",
                    stacklevel=2,
                )

    def measured_keys(self, task: str) -> set[str]:
        return {m.key for m in self.measures if m.task == task}

    def trials(self, task: str | None = None, tuner: str | None = None) -> list[MeasureRecord]:
        return [m for m in self.measures if (task is None or m.task == task) and (tuner is None or m.tuner == tuner)]

    def schedules(self, space: Any, tuner: str | None = None, *,
                  readable_only: bool = True) -> list[tuple[Any, float]]:
        """The trials as (state of `space`, mean seconds), in trial order, for offline analyses that
        refit or compare schedules; `readable_only` leaves out failed runs and records that match
        no sketch of `space` (state None)."""
        rows = [(space.state_from_record(m.record), m.mean_s) for m in self.trials(tuner=tuner)]
        return [(s, t) for s, t in rows if s is not None and math.isfinite(t)] if readable_only else rows

    def best(self, task: str) -> MeasureRecord | None:
        ok = [m for m in self.measures if m.task == task and m.ok]
        return min(ok, key=lambda m: m.mean_s) if ok else None

    def tasks(self) -> list[str]:
        return list(self.workloads)

    # ------------------------------------------------------------------ writing
    def expect_timing(self, timing: str) -> None:
        """Bind the file to the runner's way of timing ("cold" or "warm") and stamp it on every trial
        appended from now on. A file whose trials were timed the other way is refused: a resumed
        search would rank its schedules on two scales (a weight-heavy kernel runs faster warm, its
        weights in cache) and `compile` would pick by the faster one. Trials written before the
        stamp existed carry none and are taken as they are."""
        other = {m.extra.get("timing") for m in self.measures} - {None, timing}
        if other:
            flag = "--no-cache-flush" if other == {"warm"} else "--cache-flush"
            raise HiertuneError(
                f"--records {self.path} holds trials timed {'/'.join(sorted(other))} and this runner times {timing}; "
                f"resume it with {flag}, or give a new --records file (one file, one way of timing)")
        self.timing = timing

    def _write(self, data: dict[str, Any]) -> None:
        if not self.writer:
            raise HiertuneError(f"{self.path} was opened to read only (writer=False); open it as a writer to add records")
        with self.path.open("a", encoding="utf-8") as f:
            if self._torn_tail:
                f.write("\n")
                self._torn_tail = False
            f.write(json.dumps(data, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def add_workload(self, task: str, mod: Any, weight: int = 1) -> None:
        """Store a task's workload once; later runs on the same file reuse it. A file whose task of
        that name is another program (its structural hash differs) is refused: its trials would
        count toward this task's budget and resume its search, yet never apply to it."""
        from tvm.s_tir import meta_schedule as ms

        workload = ms.database.Workload(mod).as_json()
        if task in self.workloads:
            stored = self.workloads[task].get("workload") or [str(workload[0])]  # a file without one: no check
            if str(stored[0]) != str(workload[0]):
                raise HiertuneError(
                    f"--records {self.path} holds task {task!r} as another program (another shape, or an "
                    "earlier hiertune's import, e.g. convolutions in NCHW where CPU models now tune NHWC); "
                    "give a new --records file")
            return
        data = {"kind": "workload", "task": task, "weight": weight, "workload": workload}
        self._write(data)
        self.workloads[task] = data

    def append(self, record: MeasureRecord) -> None:
        if record.task not in self.workloads:
            raise HiertuneError(f"record for task {record.task!r} before its workload was stored (add_workload first)")
        if self.timing is not None:
            record.extra.setdefault("timing", self.timing)
        self._write(record.to_json())
        self.measures.append(record)

    def extend(self, records: Iterable[MeasureRecord]) -> None:
        for record in records:
            self.append(record)

    # ------------------------------------------------------------------ MetaSchedule
    def to_database(self) -> Any:
        """A MetaSchedule MemoryDatabase with every successful measurement, for `compile`/apply."""
        from tvm.s_tir import meta_schedule as ms

        db = ms.database.MemoryDatabase()
        by_task = {}
        for task, data in self.workloads.items():
            workload = ms.database.Workload.from_json(data["workload"])
            by_task[task] = db.commit_workload(workload.mod)
        for m in self.measures:
            if not m.ok or m.task not in by_task:
                continue
            workload = by_task[m.task]
            trace_json, _, target_json, args_json = m.record
            record = ms.database.TuningRecord.from_json([trace_json, m.latencies_s, target_json, args_json], workload)
            db.commit_tuning_record(record)
        return db

    def workload_mod(self, task: str) -> Any:
        from tvm.s_tir import meta_schedule as ms

        if task not in self.workloads:
            raise HiertuneError(f"{self.path} has no task {task!r}; it has {sorted(self.workloads)}")
        return ms.database.Workload.from_json(self.workloads[task]["workload"]).mod
