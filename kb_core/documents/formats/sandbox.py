"""Conversions run in a child process with a memory and a processor-time limit, and a wall-clock deadline.

A converter reads hostile bytes with libraries written in C (PDFium, libxml2): a file that makes one allocate
without end, loop or crash must cost the child, never the process serving lookups. `run_child` starts
`python -c` importing this very `kb_core` (no fork of a process holding threads and locks, as
`keywords.parallel_scan` does), which sets `RLIMIT_AS` and `RLIMIT_CPU` on itself before it reads a byte, and
talks over its pipes in frames: the parent sends the kind, the name and the bytes; the child answers with
progress frames and one final frame, all JSON. Nothing the child says builds an object: the parent checks each
field's type, and a refusal names one of the error classes of `REFUSALS` (or a limit of `LIMITS`), nothing
else.

What the parent makes of the end: the rendition's fields; the child's own refusal (`ConversionRejected`); "ran
out of its N MB" when it reports a MemoryError (or dies saying so); "took longer than N s" when it passed the
deadline (killed) or its processor time (SIGXCPU); a crash (a signal) as a damaged file.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import queue
import resource
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kb_core import errors
from kb_core.errors import ConversionLimitRejected, DamagedDocumentRejected, DocumentError

log = logging.getLogger(__name__)

_FRAME = struct.Struct("<Q")
MAX_FRAME = 64 * 1024 * 1024  # the largest answer: the rendition's text is capped below this
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
PROGRESS_EVERY = 0.2  # seconds between two progress frames of the child
REFUSALS = {name: getattr(errors, name) for name in (
    "ConversionRejected", "UnsupportedFormatRejected", "ProtectedDocumentRejected", "DamagedDocumentRejected",
    "NoTextRejected")}
LIMITS = ("zip", "memory", "time", "output")  # what a ConversionLimitRejected may name
ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class ChildLimits:
    memory_mb: int = 300
    seconds: float = 60.0  # wall clock, and processor time alike


@dataclass(frozen=True)
class ChildAnswer:
    body: dict[str, Any]  # the converter's fields, checked by the caller
    seconds: float
    peak_rss_kb: int  # as the child measured itself (a figure for the benchmark, nothing more)


def send(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_FRAME.pack(len(payload)) + payload)
    stream.flush()


def receive(stream: IO[bytes], limit: int = MAX_FRAME) -> bytes:
    head = stream.read(_FRAME.size)
    if len(head) < _FRAME.size:
        raise EOFError("the other process closed the pipe")
    (size,) = _FRAME.unpack(head)
    if size > limit:
        raise ValueError(f"a frame of {size} bytes")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other process closed the pipe")
    return data


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def serve() -> None:
    """The child: limits first, then one conversion of what the parent sends (`sys.argv`: MB, seconds)."""
    memory = int(sys.argv[1]) * 1024 * 1024
    seconds = max(int(float(sys.argv[2])), 1)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames goes into the pipe
    header = json.loads(receive(source, 4096))
    data = receive(source)
    sent = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - sent[0] >= PROGRESS_EVERY or done == total:
            sent[0] = now
            send(sink, _json({"progress": [done, total]}))

    send(sink, _json(_outcome(header, data, progress)))


def _outcome(header: dict[str, Any], data: bytes, progress: ProgressFn) -> dict[str, Any]:
    from kb_core.documents.formats.converters import convert_here
    from kb_core.errors import ConversionRejected

    try:
        body = convert_here(header["kind"], data, header["file_name"], progress)
    except MemoryError:
        return {"memory": True}
    except OSError as exc:  # a library that cannot map its shared object or a buffer: the address space is full
        if exc.errno == errno.ENOMEM or "map segment" in str(exc) or "allocate memory" in str(exc):
            return {"memory": True}
        return {"failed": f"{type(exc).__name__}: {exc}"[:500]}
    except ConversionRejected as exc:
        return {"refused": type(exc).__name__, "message": str(exc), "limit": getattr(exc, "limit", None)}
    except RecursionError:
        return {"failed": "the document nests too deep"}
    except Exception as exc:  # noqa: BLE001 - a library's own error on a hostile file: the parent refuses it
        return {"failed": f"{type(exc).__name__}: {exc}"[:500]}
    return {"ok": body, "peak_rss_kb": peak_rss_kb()}


def peak_rss_kb() -> int:
    """This process's peak resident memory since its `exec` (VmHWM): `ru_maxrss` would report the forking
    parent's peak, which Linux carries across `exec`."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["MALLOC_ARENA_MAX"] = "2"  # each thread's malloc arena reserves 64 MB of address space otherwise
    env["OMP_NUM_THREADS"] = "1"
    return env


def _start(limits: ChildLimits) -> subprocess.Popen:
    try:
        return subprocess.Popen(  # noqa: S603 - this interpreter, our own module
            [sys.executable, "-c", "from kb_core.documents.formats.sandbox import serve; serve()",
             str(limits.memory_mb), str(limits.seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_environment(),
            close_fds=True, cwd=_PACKAGE_ROOT)
    except OSError as exc:
        raise DocumentError("convert", f"the converter process could not start ({exc}); nothing was written") \
            from None


def _feed(process: subprocess.Popen, header: bytes, data: bytes) -> None:
    try:
        send(process.stdin, header)
        send(process.stdin, data)
        process.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass  # the child died early: its end says why


def _pump(stream: IO[bytes], frames: queue.Queue) -> None:
    try:
        while True:
            frames.put(json.loads(receive(stream)))
    except (EOFError, ValueError, OSError) as exc:
        frames.put(exc)


def _drain(stream: IO[bytes], tail: deque) -> None:
    try:
        for line in stream:
            tail.append(line.decode("utf-8", "replace"))
    except (OSError, ValueError):
        pass


def run_child(kind: str, data: bytes, file_name: str, limits: ChildLimits, progress: ProgressFn) -> ChildAnswer:
    """The converter's fields for `data`, computed in a limited child; raises the refusal it ended in."""
    started = time.monotonic()
    process = _start(limits)
    frames: queue.Queue = queue.Queue()
    tail: deque[str] = deque(maxlen=40)
    threads = [threading.Thread(target=_feed, args=(process, _json({"kind": kind, "file_name": file_name}), data),
                                daemon=True),
               threading.Thread(target=_pump, args=(process.stdout, frames), daemon=True),
               threading.Thread(target=_drain, args=(process.stderr, tail), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        final = _final_frame(frames, started + limits.seconds, progress)
    finally:
        _end(process)
    seconds = time.monotonic() - started
    if final is None:
        raise _died(process, file_name, limits, seconds, tail)
    return _answer(final, file_name, limits, seconds)


def _final_frame(frames: queue.Queue, deadline: float, progress: ProgressFn) -> object | None:
    """The child's last frame, reporting its progress frames on the way; None when it ends without one or
    passes the deadline."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "deadline"
        try:
            frame = frames.get(timeout=remaining)
        except queue.Empty:
            return "deadline"
        if isinstance(frame, Exception):
            return None
        if isinstance(frame, dict) and set(frame) == {"progress"}:
            done, total = frame["progress"] if isinstance(frame["progress"], list) else (0, 0)
            if type(done) is int and type(total) is int:
                progress(done, total)
            continue
        return frame


def _end(process: subprocess.Popen) -> None:
    try:
        process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


def _time_limit(file_name: str, seconds: float) -> ConversionLimitRejected:
    return ConversionLimitRejected(f"converting {file_name} took longer than {seconds:g} s, its limit: nothing "
                                   "was written; split the file into smaller ones", limit="time")


def _memory_limit(file_name: str, limits: ChildLimits) -> ConversionLimitRejected:
    return ConversionLimitRejected(f"the converter ran out of its {limits.memory_mb} MB on {file_name}: nothing was "
                                   "written; split the file into smaller ones", limit="memory")


def _died(process: subprocess.Popen, file_name: str, limits: ChildLimits, seconds: float,
          tail: deque[str]) -> Exception:
    code = process.returncode
    said = "".join(tail)
    log.debug("the converter of %s ended with %s: %s", file_name, code, said[-2000:])
    if code == -signal.SIGXCPU or seconds >= limits.seconds:
        return _time_limit(file_name, limits.seconds)
    if "MemoryError" in said or "Cannot allocate memory" in said or "out of memory" in said.lower():
        return _memory_limit(file_name, limits)
    how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
    return DamagedDocumentRejected(f"the converter stopped on {file_name} ({how}): the file is damaged, or it needs "
                                   f"more than the converter's {limits.memory_mb} MB; nothing was written")


def _answer(final: object, file_name: str, limits: ChildLimits, seconds: float) -> ChildAnswer:
    if final == "deadline":
        raise _time_limit(file_name, limits.seconds)
    if not isinstance(final, dict):
        raise DamagedDocumentRejected(f"the converter of {file_name} answered nonsense: nothing was written")
    if final.get("memory") is True:
        raise _memory_limit(file_name, limits)
    if isinstance(final.get("refused"), str) and isinstance(final.get("message"), str):
        message = final["message"][:2000]
        if final["refused"] == "ConversionLimitRejected":
            limit = final.get("limit")
            raise ConversionLimitRejected(message, limit=limit if limit in LIMITS else "zip")
        raise REFUSALS.get(final["refused"], DamagedDocumentRejected)(message)
    if isinstance(final.get("failed"), str):
        raise DamagedDocumentRejected(f"{file_name} could not be converted ({final['failed'][:300]}): the file is "
                                      "damaged or of a kind its converter does not read; nothing was written")
    body, peak = final.get("ok"), final.get("peak_rss_kb")
    if not isinstance(body, dict) or type(peak) is not int:
        raise DamagedDocumentRejected(f"the converter of {file_name} answered nonsense: nothing was written")
    return ChildAnswer(body, seconds, peak)
