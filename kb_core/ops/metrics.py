"""Prometheus metrics of one knowledge base (docs/operations.md#metrics lists them all).

Each `KnowledgeBase` has its own `CollectorRegistry` (a process may open several; the global registry would
mix them). The facade feeds it: every lookup (the `lookup_knowledge` tool and `KnowledgeBase.lookup`), every
tool call, every write and job. What the stores hold and how far the change feed is behind are read at scrape
time by a collector from the cached `status()` and the change follower's position: a scrape never counts rows
or walks the folder (a stale status is refreshed on a background thread; the next scrape shows it).

The registry is served at `/metrics` by the MCP HTTP server (behind its bearer token when there is one) and, in
any process, on `KB_METRICS_PORT` (`KB_METRICS_HOST`, default 127.0.0.1).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, make_asgi_app
from prometheus_client.core import GaugeMetricFamily, Metric

log = logging.getLogger(__name__)

# The three ways a lookup goes (its latency histogram's `path`) and what L0 found on each (`outcome`).
PATH_L0_UNIQUE = "l0_unique"  # one page matched a specific keyword: L0 answered, L1 not called
PATH_L0_L1 = "l0_l1"  # several pages (or only generic keywords) matched: L1 called to decide or supplement
PATH_L1_ONLY = "l1_only"  # no page matched: L1 answers (or nothing is found)
L0_OUTCOMES = {PATH_L0_UNIQUE: "unique", PATH_L0_L1: "ambiguous", PATH_L1_ONLY: "miss"}

WRITES = ("upload", "delete", "restore", "purge", "reindex", "synonyms")  # kb_write_duration_seconds{operation}
JOBS = ("reconcile", "reindex_all", "watch_sync")  # kb_job_duration_seconds{name}
TOOL_OUTCOMES = ("found", "not_found", "error")

LOOKUP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
WRITE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
JOB_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0)

LOOPBACK = ("127.0.0.1", "localhost", "::1")
METRICS_CONNECTIONS = 32  # open connections the metrics port takes at most (a scraper needs one or two)


def loopback_host(header: str | None) -> bool:
    """Whether a request's `Host` names a loopback address (a missing one too: browsers always send it). A
    server on loopback answers only those: a web page cannot read it through DNS rebinding."""
    if not header:
        return True
    name = header[1:].split("]")[0] if header.startswith("[") else header.rsplit(":", 1)[0]
    return name.lower() in LOOPBACK


def lookup_path(trace: Any) -> str | None:
    """The path a lookup took, from its trace; `None` for a blank query (nothing was looked up)."""
    if not (isinstance(trace.query, str) and trace.query.strip()):
        return None
    if not trace.l1_called:
        return PATH_L0_UNIQUE
    return PATH_L0_L1 if trace.l0_count else PATH_L1_ONLY


class KnowledgeBaseMetrics:
    """The metrics of one knowledge base and the registry they are exposed from."""

    def __init__(self, *, process: bool = True) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.lookup_seconds = Histogram(
            "kb_lookup_duration_seconds", "Lookup latency (the lookup's own total time) by the path it took: "
            "l0_unique, l0_l1, l1_only", ["path"], buckets=LOOKUP_BUCKETS, registry=r)
        self.l0_outcomes = Counter("kb_l0_outcomes", "Lookups by what L0 found: unique, ambiguous, miss",
                                   ["outcome"], registry=r)
        self.l1_errors = Counter("kb_l1_errors", "Lookups whose L1 search failed (answered from L0 alone)",
                                 registry=r)
        self.tool_calls = Counter("kb_tool_calls", "Agent tool calls by tool and outcome: found, not_found, error "
                                  "(refused arguments, unknown source, failure)", ["tool", "outcome"], registry=r)
        # who called (a named token, a signed-in user, the service identity): a counter of its own, so the
        # tool/outcome series keep their labels; at most MAX_CALLERS names, the rest counted as "other"
        self.caller_calls = Counter("kb_tool_calls_by_caller", "Agent tool calls by caller: an MCP token's name, "
                                    "a console user, the service identity", ["caller"], registry=r)
        self._callers: set[str] = set()
        self.write_seconds = Histogram("kb_write_duration_seconds", "Duration of writes (failed ones too) by "
                                       "operation: upload, delete, reindex", ["operation"], buckets=WRITE_BUCKETS,
                                       registry=r)
        self.write_failures = Counter("kb_write_failures", "Writes that raised an error, by operation",
                                      ["operation"], registry=r)
        # the label is `name`: Prometheus adds `job` (the scrape job) to every series itself
        self.job_seconds = Histogram("kb_job_duration_seconds", "Duration of jobs (failed ones too) by name: "
                                     "reconcile, reindex_all, watch_sync (the folder watcher's reconcile)", ["name"],
                                     buckets=JOB_BUCKETS, registry=r)
        self.job_failures = Counter("kb_job_failures", "Jobs that raised an error, by name", ["name"], registry=r)
        # every label value from the start: a dashboard's rate() sees 0, not a missing series
        for path, outcome in L0_OUTCOMES.items():
            self.lookup_seconds.labels(path)
            self.l0_outcomes.labels(outcome)
        for operation in WRITES:
            self.write_seconds.labels(operation)
            self.write_failures.labels(operation)
        for job in JOBS:
            self.job_seconds.labels(job)
            self.job_failures.labels(job)
        # the labelled children a lookup updates, looked up once (labels() takes a lock and builds a key)
        self._per_path = {path: (self.lookup_seconds.labels(path), self.l0_outcomes.labels(outcome))
                          for path, outcome in L0_OUTCOMES.items()}
        if process:
            ProcessCollector(registry=r)  # process_resident_memory_bytes, process_cpu_seconds_total, ...
        self._state: _StateCollector | None = None
        self._server: Any = None

    # -- what the facade reports -----------------------------------------------------------------------
    def observe_lookup(self, result: Any) -> None:
        """One lookup (a `LookupResult`): its latency by path, L0's outcome and an L1 error."""
        trace = result.trace
        path = lookup_path(trace)
        if path is None:
            return
        seconds, outcome = self._per_path[path]
        seconds.observe(trace.timings_ms.get("total", 0.0) / 1000)
        outcome.inc()
        if trace.l1_error:
            self.l1_errors.inc()

    MAX_CALLERS = 100

    def observe_tool_call(self, tool: str, *, found: bool, error: str | None, caller: str | None = None) -> None:
        self.tool_calls.labels(tool, "error" if error else "found" if found else "not_found").inc()
        if caller is not None:
            name = caller[:64]
            if name not in self._callers and len(self._callers) >= self.MAX_CALLERS:
                name = "other"
            self._callers.add(name)
            self.caller_calls.labels(name).inc()

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Time a write (`WRITES`) or a job (`JOBS`); an `Exception` leaving the block counts as a failure."""
        seconds, failures = (self.job_seconds, self.job_failures) if name in JOBS else \
            (self.write_seconds, self.write_failures)
        started = time.perf_counter()
        try:
            yield
        except Exception:
            failures.labels(name).inc()
            raise
        finally:
            seconds.labels(name).observe(time.perf_counter() - started)

    def watch_state(self, status: Callable[[], Any], follower: Any = None) -> None:
        """Read at scrape time: `status()` returns the cached `KnowledgeBaseStatus` (or None: not computed
        yet), `follower` the change follower (its lag)."""
        if self._state is None:
            self._state = _StateCollector(status, follower)
            self.registry.register(self._state)

    # -- serving ---------------------------------------------------------------------------------------
    def serve(self, port: int, host: str = "127.0.0.1") -> bool:
        """Serve the registry over HTTP on `host:port` (any path answers with the metrics) until `close()`; on
        loopback only to requests whose `Host` is loopback. Served by the guarded server (`kb_core.ops.http_guard`:
        deadlines for slow clients, a small cap on open connections), on a thread of its own: idle clients
        cannot take the host process's file descriptors. A port already taken (another process on the same
        settings) is logged, not raised."""
        from kb_core.ops.http_guard import HttpLimits, start_in_thread

        if self._server is not None:
            return True
        app = MetricsRoute(None, self.registry, path=None, loopback_only=host in LOOPBACK)
        try:
            self._server = start_in_thread(app, host=host, port=port, name="metrics",
                                           limits=HttpLimits(max_connections=METRICS_CONNECTIONS))
        except OSError as exc:
            log.warning("metrics not served on %s:%d: %s (another process may be serving that port)", host, port,
                        exc)
            return False
        log.info("metrics served on http://%s:%d/metrics", host, port)
        return True

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


class _StateCollector:
    """Documents and chunks per store, whether each backend answered, and the change feed's lag."""

    def __init__(self, status: Callable[[], Any], follower: Any) -> None:
        self._status = status
        self._follower = follower

    def describe(self) -> list[Metric]:
        return []  # nothing to compute at registration

    def collect(self) -> Iterator[Metric]:
        try:
            status = self._status()
        except Exception as exc:  # noqa: BLE001 - a scrape must answer with what it has
            log.debug("no status for the metrics: %s", exc)
            status = None
        if status is not None:
            counts = status.counts
            documents = GaugeMetricFamily("kb_documents", "Documents per store (from the cached status): files "
                                          "on disk, l0, database rows, milvus", labels=["store"])
            for store, value in (("files", counts.files), ("l0", counts.l0), ("database", counts.database),
                                 ("milvus", counts.milvus)):
                if value is not None:
                    documents.add_metric([store], value)
            yield documents
            chunks = GaugeMetricFamily("kb_chunks", "Chunks per store (from the cached status): database (what "
                                       "the rows say), milvus", labels=["store"])
            for store, value in (("database", counts.database_chunks), ("milvus", counts.milvus_chunks)):
                if value is not None:
                    chunks.add_metric([store], value)
            yield chunks
            up = GaugeMetricFamily("kb_store_up", "1 when the store answered the last status, else 0",
                                   labels=["store"])
            up.add_metric(["database"], 0 if status.database_error else 1)
            up.add_metric(["milvus"], 0 if status.milvus_error else 1)
            yield up
            yield GaugeMetricFamily("kb_consistent", "1 when files, database and Milvus agree (status)",
                                    value=1 if counts.consistent else 0)
        follower = self._follower
        if follower is not None and follower.seconds_behind is not None:
            yield GaugeMetricFamily("kb_change_feed_lag_seconds", "Seconds since this process last read the "
                                    "change feed to its end (normally below KB_REFRESH_INTERVAL)",
                                    value=follower.seconds_behind)
            yield GaugeMetricFamily("kb_change_feed_behind_changes", "Changes in the feed this process had not "
                                    "applied at its last read", value=follower.changes_behind)


class MetricsRoute:
    """ASGI: `path` (GET /metrics; None: every path) answers with the registry; every other request goes to
    `app`. With `loopback_only` it answers only requests whose `Host` is loopback (as the MCP transport checks
    its own)."""

    def __init__(self, app: Any, registry: CollectorRegistry, path: str | None = "/metrics", *,
                 loopback_only: bool = False) -> None:
        self._app = app
        self._metrics = make_asgi_app(registry=registry)
        self._path = path
        self._loopback_only = loopback_only

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (self._path is None or scope.get("path") == self._path):
            host = dict(scope.get("headers") or ()).get(b"host")
            if self._loopback_only and not loopback_host(host.decode("latin-1") if host else None):
                body = b"metrics answer requests for a loopback host only"
                headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 403, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            await self._metrics(scope, receive, send)
            return
        await self._app(scope, receive, send)
