"""The L0 entries of many files, parsed in child processes: a full scan of 100,000 pages is CPU work (read,
frontmatter, headings, language) that one core does in tens of seconds.

`parse_files` starts up to one child per core (`python -c`, importing this very `kb_core`: no fork of a
process that may hold threads and locks, no re-import of the caller's `__main__` as `multiprocessing`'s spawn
does), hands out chunks of relative paths as the children ask for them, and returns, per path, what
`entry_of_file` gave there: the entry (or None), or the text of the `OSError`/`UnicodeDecodeError` it raised,
with the log records the parse made, so that the caller logs them in file order as a serial scan would.
Anything that goes wrong with a child (it cannot start, it dies, it answers nonsense) only leaves its chunks
out of the answer: the caller parses those itself, as it parses everything below `PARALLEL_FROM` files.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from kb_core.documents.folder import KnowledgeFolder
from kb_core.keywords.entry import KnowledgeEntry, entry_of_file, shared_entry

log = logging.getLogger(__name__)

__all__ = ["ENTRY", "NO_ENTRY", "PARALLEL_FROM", "UNREADABLE", "Outcome", "parse_files", "scan_processes"]

PARALLEL_FROM = 5000  # files to parse: below it, starting the children (~0.5 s) costs more than it saves
CHUNK = 1000  # files a child parses per request
MAX_PROCESSES = 8
ENTRY, NO_ENTRY, UNREADABLE = 0, 1, 2
# (kind, the entry / None / the error's text, the log records of the parse: (logger name, level, message))
Outcome = tuple[int, Any, tuple[tuple[str, int, str], ...]]
_FRAME = struct.Struct("<Q")
_PACKAGE_FILE = str(Path(__file__).resolve().parent.parent / "__init__.py")


def scan_processes() -> int:
    """How many child processes a large scan uses: `KB_L0_SCAN_PROCESSES` when set (0 or 1: none), else one per
    core this process may run on (none on one core), at most MAX_PROCESSES."""
    configured = os.environ.get("KB_L0_SCAN_PROCESSES", "").strip()
    if configured:
        try:
            return max(0, min(int(configured), MAX_PROCESSES))
        except ValueError:
            log.warning("KB_L0_SCAN_PROCESSES=%r is not a number: the scan uses no child processes", configured)
            return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(cores, MAX_PROCESSES) if cores > 1 else 0


def _send(stream: IO[bytes], value: object) -> None:
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    stream.write(_FRAME.pack(len(data)) + data)
    stream.flush()


MAX_FRAME = 256 * 1024 * 1024  # a chunk's answer is a few MB; anything larger is not a child of ours talking


def _receive(stream: IO[bytes]) -> Any:
    """One JSON value (data only: the other side's bytes are never trusted to build objects)."""
    head = stream.read(_FRAME.size)
    if len(head) < _FRAME.size:
        raise EOFError("the other process closed the pipe")
    (size,) = _FRAME.unpack(head)
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other process closed the pipe")
    return json.loads(data)


def _fields(entry: KnowledgeEntry) -> list[Any]:
    fields = list(entry.__reduce__()[1])
    fields[-1] = base64.b64encode(fields[-1]).decode("ascii")  # the packed cold fields: bytes
    return fields


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of strings")
    return tuple(value)


def _checked(outcome: object) -> Outcome:
    """An outcome as a child sent it, checked field by field: a wrong shape raises ValueError (the chunk is then
    parsed here)."""
    if not isinstance(outcome, list) or len(outcome) != 3 or outcome[0] not in (ENTRY, NO_ENTRY, UNREADABLE):
        raise ValueError("not an outcome")
    kind, value, raw_records = outcome
    if not isinstance(raw_records, list):
        raise ValueError("not a list of log records")
    records = []
    for record in raw_records:
        if not (isinstance(record, list) and len(record) == 3 and isinstance(record[0], str)
                and type(record[1]) is int and isinstance(record[2], str)):
            raise ValueError("not a log record")
        records.append((record[0], record[1], record[2]))
    if kind == NO_ENTRY:
        if value is not None:
            raise ValueError("an entry where none was")
    elif kind == UNREADABLE:
        if not isinstance(value, str):
            raise ValueError("not an error text")
    else:
        if not isinstance(value, list) or len(value) != 8:
            raise ValueError("not an entry")
        path, keywords, category, lang, group, ignored, audience, cold = value
        if not (isinstance(path, str) and isinstance(lang, str) and isinstance(group, str)
                and (category is None or isinstance(category, str)) and isinstance(cold, str)
                and isinstance(ignored, list)):
            raise ValueError("not an entry")
        pairs = []
        for pair in ignored:
            first, second = _strings(pair) if isinstance(pair, list) and len(pair) == 2 else ("", None)
            if second is None:
                raise ValueError("not an ignored keyword")
            pairs.append((first, second))
        value = (path, _strings(keywords), category, lang, group, tuple(pairs), _strings(audience),
                 base64.b64decode(cold.encode("ascii"), validate=True))
    return kind, value, tuple(records)


class _Records(logging.Handler):
    """The records of one file's parse, as (logger name, level, message)."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.name, record.levelno, record.getMessage()))


def outcome_of(folder: KnowledgeFolder, relative: str, records: _Records) -> Outcome:
    records.records = []
    try:
        entry = entry_of_file(folder, relative)
    except (OSError, UnicodeDecodeError) as exc:
        return UNREADABLE, str(exc), tuple(records.records)
    if entry is None:
        return NO_ENTRY, None, tuple(records.records)
    return ENTRY, _fields(entry), tuple(records.records)


def _serve() -> None:
    """A child: parse the chunks the parent sends until it sends None (or goes away)."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames goes into the pipe
    records = _Records()
    package = logging.getLogger("kb_core")
    package.addHandler(records)
    package.setLevel(logging.DEBUG)  # the parent applies its own levels to what it replays
    package.propagate = False
    import kb_core

    _send(sink, ("kb_core", str(Path(kb_core.__file__).resolve())))
    try:
        config = _receive(source)
        folder = KnowledgeFolder(config["base"], app_root=config["app_root"], max_bytes=config["max_bytes"])
        while (job := _receive(source)) is not None:
            number, relatives = job
            _send(sink, (number, [outcome_of(folder, relative, records) for relative in relatives]))
    except (EOFError, BrokenPipeError):
        return


class _Child:
    def __init__(self, config: dict[str, Any]):
        env = dict(os.environ)
        here = str(Path(_PACKAGE_FILE).parent.parent)
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["KB_L0_SCAN_PROCESSES"] = "0"
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter, our own module
            [sys.executable, "-c", "from kb_core.keywords.parallel_scan import _serve; _serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True, cwd=here)  # ('' on sys.path)
        self.config = config

    def pump(self, chunks: deque[tuple[int, list[str]]], lock: threading.Lock,
             results: dict[int, list[Outcome]]) -> None:
        """Feed chunks to the child (two in flight) until there are none left; what it answers goes into
        `results`. Any failure ends the child: its chunks are missing from `results` (the caller parses them)."""
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        sent: deque[int] = deque()

        def send_next() -> bool:
            with lock:
                if not chunks:
                    return False
                number, relatives = chunks.popleft()
            sent.append(number)
            _send(process.stdin, (number, relatives))
            return True

        try:
            hello = _receive(process.stdout)
            if hello != ["kb_core", _PACKAGE_FILE]:
                log.debug("an L0 scan child imported another kb_core (%r): not used", hello)
                return
            _send(process.stdin, self.config)
            send_next()
            send_next()
            while sent:
                number, outcomes = _receive(process.stdout)
                if number != sent.popleft() or not isinstance(outcomes, list):
                    return
                results[number] = [_checked(outcome) for outcome in outcomes]
                send_next()
        except (OSError, EOFError, ValueError, TypeError, binascii.Error) as exc:
            log.debug("an L0 scan child failed (its files are parsed here): %s", exc)
        finally:
            self.close()

    def close(self) -> None:
        process = self.process
        for stream in (process.stdin, process.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def parse_files(folder: KnowledgeFolder, relatives: Sequence[str], processes: int) -> dict[str, Outcome]:
    """What `entry_of_file` gives each of `relatives`, parsed by `processes` children; paths whose chunk a
    child did not parse are left out. Empty when no child could start."""
    if processes < 2 or not relatives:
        return {}
    config = {"base": folder.display_path(""), "app_root": os.path.abspath(folder.app_root),
              "max_bytes": folder.max_bytes}
    chunks = deque((i, list(relatives[start:start + CHUNK]))
                   for i, start in enumerate(range(0, len(relatives), CHUNK)))
    numbered = list(chunks)
    lock = threading.Lock()
    results: dict[int, list[Outcome]] = {}
    children: list[_Child] = []
    for _ in range(min(processes, len(chunks))):
        try:
            children.append(_Child(config))
        except (OSError, ValueError) as exc:
            log.debug("cannot start an L0 scan child (parsing here): %s", exc)
            break
    threads = [threading.Thread(target=child.pump, args=(chunks, lock, results), name="kb-l0-scan", daemon=True)
               for child in children]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found: dict[str, Outcome] = {}
    for number, paths in numbered:
        outcomes = results.get(number)
        if outcomes is not None and len(outcomes) == len(paths):
            found.update(zip(paths, outcomes, strict=True))
    return found


def entry_of_outcome(outcome: Outcome) -> KnowledgeEntry | None:
    """The entry a child parsed, its strings shared with this process's other entries (`sys.intern`)."""
    kind, value, _records = outcome
    return shared_entry(*value) if kind == ENTRY else None


def replay(outcome: Outcome) -> None:
    """Log what the parse logged, as if it ran here."""
    for name, level, message in outcome[2]:
        logger = logging.getLogger(name)
        if logger.isEnabledFor(level):
            logger.log(level, "%s", message)
