"""Chunks in Milvus through pymilvus `MilvusClient`: schema, insert, delete, BM25 and dense search.

The same code runs on Milvus Lite (a local `*.db` directory, the embedded default) and on a Milvus server
(`http://host:19530`). One collection per embedding model and dimension, so switching models never mixes
vectors; without a model the collection holds full text only.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kb_core.errors import KnowledgeBaseError, VectorStoreError
from kb_core.storage.fulltext_sqlite import SqliteFullTextIndex
from kb_core.storage.lite_sharing import (
    GRPC_OPTIONS,
    LiteSession,
    open_lite,
    pid_alive,
    quiet_pymilvus_connection_logs,
    release_lite,
    writing,
)
from kb_core.storage.ports import ChunkRow, ScoredChunk
from kb_core.terms import STOP_WORDS

__all__ = ["ChunkRow", "FULLTEXT_PROFILE", "MilvusVectorStore", "ScoredChunk", "collection_name"]

log = logging.getLogger(__name__)


class _DropUnimplementedRpcNoise(logging.Filter):
    """Milvus Lite's embedded gRPC server logs a traceback for RPCs pymilvus probes but Lite does not
    implement (AllocTimestamp); they are harmless and would alarm every operator."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Method not implemented" not in record.getMessage()


logging.getLogger("grpc._server").addFilter(_DropUnimplementedRpcNoise())

_OUTPUT = ["doc_id", "source", "category", "chunk_no", "heading", "text"]
MAX_TEXT = 65535
# A category is a folder path of up to 255 characters (documents.path_rule.MAX_CATEGORY_CHARS; ASCII, so characters
# are bytes). Collections made before nested categories hold 64: their rows keep a cut category, which only a
# category filter reads (`category_chars` says how long the open collection's are).
CATEGORY_CHARS = 255
LEGACY_CATEGORY_CHARS = 64
FULLTEXT_PROFILE = "fulltext"


def collection_name(model_id: str | None, dimension: int | None) -> str:
    """`kb_bge_m3_1024_1a2b3c` for a model, `kb_fulltext` without one."""
    if not model_id or not dimension:
        return f"kb_{FULLTEXT_PROFILE}"
    base = re.sub(r"[^a-z0-9]+", "_", Path(model_id.rstrip("/")).name.lower()).strip("_")[:40] or "model"
    digest = hashlib.sha1(model_id.encode("utf-8")).hexdigest()[:6]
    return f"kb_{base}_{dimension}_{digest}"


def is_local_uri(uri: str) -> bool:
    return "://" not in uri


@contextmanager
def _milvus(what: str) -> Iterator[None]:
    """Turn whatever pymilvus raises (a zoo of types) into a `VectorStoreError` saying `what` failed."""
    try:
        yield
    except KnowledgeBaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - pymilvus raises many unrelated types
        raise VectorStoreError(f"{what}: {exc}") from exc


def _describe(exc: Exception) -> str:
    """gRPC errors print as a multi-line repr, pymilvus' as `<MilvusException: (code=2, message=...)>`; their
    code and details (or message) say the same in one line."""
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message:
        return message
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):
        try:
            return f"{code().name}: {details()}"
        except Exception:  # noqa: BLE001 - not a finished RPC after all
            pass
    return str(exc)


_PLACEHOLDER = {0: 1.0}  # the `sparse` of a collection without BM25: Milvus refuses an empty sparse vector


def _skip_per_character_checks() -> None:
    """pymilvus' row packing hands each VARCHAR value to a check written for a column: it loops over the
    string's characters, testing that each is a `str` no longer than the field's maximum - always true of a
    character, so it can never fail for text, only cost time (a fifth of a 1,200-page reconcile: 2.6 s for
    77,000 values). Our rows are cut to each field's length before they are sent (`upsert`), and the server
    checks lengths itself."""
    from pymilvus.client import entity_helper

    entity_helper.CHECK_STR_ARRAY = False


FILTER_IDS = 256  # above this many documents in a scope, search a few times wider before filtering by a list
OVERFETCH = (4, 32)  # how many times the limit is asked for before the id list is sent


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


class MilvusVectorStore:
    def __init__(self, uri: str, *, token: str | None = None, collection: str, dense_dim: int | None,
                 timeout: float = 10.0, fulltext: SqliteFullTextIndex | None = None):
        self._timeout = timeout
        # Embedded mode: BM25 runs on SQLite FTS5 (C) instead of Milvus Lite's pure-Python BM25, which grows
        # with the chunk count (p99 441 ms against 117 ms at 20,000 chunks). Writes go to both.
        self._fulltext = fulltext
        self._uri = uri
        self._token = token
        self._collection = collection
        self._dense_dim = dense_dim
        self._client: Any = None
        self._lock = threading.Lock()
        self._session: LiteSession | None = None  # how this process reaches a Milvus Lite directory
        self._category_chars = CATEGORY_CHARS  # of the open collection (read when it is opened)
        # Whether the open collection computes BM25 itself (a Function on `text`). Beside a full-text index it
        # does not: Milvus Lite's BM25 runs jieba in Python inside this process on every insert - a third of
        # a reconcile's time for a sparse field nothing searches. Read when the collection opens.
        self._milvus_bm25 = fulltext is None
        self._warming: threading.Thread | None = None

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def collection(self) -> str:
        return self._collection

    @property
    def has_dense(self) -> bool:
        return self._dense_dim is not None

    @property
    def dense_dim(self) -> int | None:
        return self._dense_dim

    @property
    def fulltext_engine(self) -> str:
        return "SQLite FTS5" if self._fulltext is not None else "Milvus BM25"

    # -- connection ---------------------------------------------------------------------------------
    def client(self) -> Any:
        session = self._session
        if session is not None and session.owner_gone():
            # The process serving our Milvus Lite directory exited or closed it: open again (and maybe become
            # the owner) instead of letting the call retry against a closed port until the timeout.
            with self._lock:
                if self._session is session:
                    log.warning("the Milvus Lite owner %s has gone; opening %s again",
                                session.owner.describe(), self._uri)
                    self._drop_client()
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._connect()
        return self._client

    def _drop_client(self) -> None:
        client, self._client = self._client, None
        if self._session is not None and not self._session.is_owner:
            self._session = None  # a follower finds the owner anew; an owner keeps serving its directory
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def _connect(self) -> Any:
        from pymilvus import MilvusClient
        from pymilvus.exceptions import MilvusException

        _skip_per_character_checks()

        address, extra = self._uri, {}
        if is_local_uri(self._uri):
            quiet_pymilvus_connection_logs()
            if self._session is None:
                self._session = open_lite(self._uri, timeout=self._timeout)
            address, extra = self._session.address, {"grpc_options": GRPC_OPTIONS, "dedicated": True}
        try:
            client = MilvusClient(uri=address, token=self._token or "", timeout=self._timeout, **extra)
        except MilvusException as exc:
            raise self._lite_error(VectorStoreError(f"cannot open Milvus at {self._uri}: {_describe(exc)}")) from exc
        try:
            with self._milvus(f"cannot prepare the collection {self._collection} at {self._uri}"):
                self._ensure_collection(client)
        except BaseException:
            with contextlib.suppress(Exception):
                client.close()
            raise
        return client

    @contextmanager
    def _milvus(self, what: str) -> Iterator[None]:
        with _milvus(what):
            try:
                yield
            except Exception as exc:  # noqa: BLE001 - name the owner on a follower's Milvus failure
                if type(exc).__module__.startswith(("pymilvus", "grpc")):
                    raise self._lite_error(VectorStoreError(f"{what}: {_describe(exc)}")) from exc
                raise

    def _lite_error(self, error: VectorStoreError) -> VectorStoreError:
        """On a follower, say which process serves the directory: a stuck owner is the usual cause."""
        session = self._session
        if session is None or session.owner is None:
            return error
        owner = session.owner
        if not pid_alive(owner.pid):
            state = "which has exited; the next call takes over the directory"
        elif "deadline" in str(error).lower() or "fail connecting" in str(error).lower():
            state = (f"which is running but did not answer within {self._timeout:g} s (KB_BACKEND_TIMEOUT) - "
                     "is it stopped or overloaded?")
        else:
            state = "which is running"
        return VectorStoreError(f"{error} (the Milvus Lite directory {self._uri} is served by process "
                                f"{owner.pid} at {owner.address}, {state})")

    def _ensure_collection(self, client: Any) -> None:
        from pymilvus import DataType, Function, FunctionType

        name = self._collection
        if not client.has_collection(name):
            schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
            schema.add_field("doc_id", DataType.INT64)
            schema.add_field("source", DataType.VARCHAR, max_length=1024)
            schema.add_field("category", DataType.VARCHAR, max_length=CATEGORY_CHARS)
            schema.add_field("chunk_no", DataType.INT64)
            schema.add_field("heading", DataType.VARCHAR, max_length=1024)
            if self._fulltext is None:
                schema.add_field(
                    "text", DataType.VARCHAR, max_length=MAX_TEXT, enable_analyzer=True,
                    analyzer_params={"tokenizer": "jieba",
                                     "filter": [{"type": "stop", "stop_words": sorted(STOP_WORDS)}]},
                )
            else:  # BM25 is the full-text index's; `sparse` holds a placeholder (a collection needs a vector)
                schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT)
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            if self._dense_dim is not None:
                schema.add_field("dense", DataType.FLOAT_VECTOR, dim=self._dense_dim)
            if self._fulltext is None:
                schema.add_function(Function(name="text_bm25", function_type=FunctionType.BM25,
                                             input_field_names=["text"], output_field_names=["sparse"]))
            index = client.prepare_index_params()
            index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX",
                            metric_type="BM25" if self._fulltext is None else "IP")
            if self._dense_dim is not None:
                index.add_index(field_name="dense", index_type="HNSW", metric_type="COSINE",
                                params={"M": 16, "efConstruction": 200})
            try:
                client.create_collection(name, schema=schema, consistency_level="Strong")
                # sync=False: pymilvus otherwise sleeps 0.5 s per index before its first "is it built?" check
                # (a second per new collection with dense vectors); loading below waits for what it needs
                client.create_index(name, index, sync=False)
                log.info("created Milvus collection %s at %s (dense dim %s)", name, self._uri, self._dense_dim)
            except Exception as exc:  # noqa: BLE001 - two processes opening a new server at once both create it
                if "already exist" not in str(exc) or not client.has_collection(name):
                    raise
        client.load_collection(name)
        description = client.describe_collection(name)
        self._category_chars = _varchar_length(description, "category") or CATEGORY_CHARS
        # a collection made before BM25 was kept in one place computes BM25 whatever the full-text index: its
        # inserts must not carry `sparse` (a function's output)
        self._milvus_bm25 = any(f.get("type") == FunctionType.BM25 for f in description.get("functions") or [])
        if self._category_chars < CATEGORY_CHARS:
            log.info("the Milvus collection %s keeps categories up to %d characters (made before nested categories)",
                     name, self._category_chars)

    @property
    def category_chars(self) -> int:
        """How many characters of a category the open collection keeps."""
        return self._category_chars

    def close(self) -> None:
        """Close the connection; an owner of a Milvus Lite directory also stops serving it and frees its
        lock, so another process can open it."""
        warming = self._warming
        if warming is not None and warming is not threading.current_thread():
            warming.join(self._timeout)  # a connection made after close would outlive its owner
        if self._fulltext is not None:
            self._fulltext.close()
        with self._lock:
            session, self._session = self._session, None
            client, self._client = self._client, None
        try:
            if client is not None:
                client.close()
        finally:
            if session is not None:
                release_lite(session)

    def warm_up_in_background(self) -> None:
        """`warm_up` on a thread of its own (Milvus Lite starts as a process: the opening goes on meanwhile); an
        outage is logged, and every use reports it until Milvus is back. `close()` waits for it."""
        def warm() -> None:
            try:
                self.warm_up()
            except KnowledgeBaseError as exc:
                log.error("Milvus is not available; L1 reports it in each answer's trace until it is back: %s",
                          exc)
            except Exception:  # noqa: BLE001 - a background chore must not die silently
                log.exception("warming up Milvus at %s failed", self._uri)

        self._warming = threading.Thread(target=warm, name="kb-milvus-warm-up", daemon=True)
        self._warming.start()

    def wait_warm_up(self) -> None:
        """Until `warm_up_in_background`'s warm-up has ended (at once when none was started)."""
        warming = self._warming
        if warming is not None and warming is not threading.current_thread():
            warming.join()

    def warm_up(self) -> None:
        """Open the collection and run one BM25 query, so the first user query does not pay for it. A
        full-text index that is empty while Milvus holds chunks (a knowledge base from before the index
        existed) is filled from Milvus first."""
        self.client()
        if self._fulltext is not None and self._fulltext.count_chunks() == 0 and self.count_chunks() > 0:
            self._backfill_fulltext()
        self.search_bm25("warm up", limit=1)
        if self._dense_dim:  # the first dense search loads the vectors (about 100 ms over 7,000 chunks)
            self.search_dense([1.0] + [0.0] * (self._dense_dim - 1), limit=1)

    def _backfill_fulltext(self) -> None:
        assert self._fulltext is not None
        copied = 0
        with self._milvus("cannot copy chunks from Milvus into the full-text index"):
            iterator = self.client().query_iterator(self._collection, batch_size=1000, filter="doc_id >= 0",
                                                    output_fields=_OUTPUT, consistency_level="Strong")
            try:
                while batch := iterator.next():
                    self._fulltext.upsert([self._row(r) for r in batch])
                    copied += len(batch)
            finally:
                iterator.close()
        log.info("filled the full-text index with %d chunks from Milvus", copied)

    # -- writes --------------------------------------------------------------------------------------
    def upsert(self, rows: Sequence[ChunkRow]) -> None:
        """Write chunks by primary key `{doc_id}:{chunk_no}`, replacing chunks with the same key."""
        if not rows:
            return
        if self._fulltext is not None:
            with self._milvus(f"cannot write {len(rows)} chunks to the full-text index"):
                self._fulltext.upsert(rows)
        self.client()  # opened first: how much of a category the collection keeps is read at open
        data = []
        for row in rows:
            item = {"id": row.chunk_id, "doc_id": row.doc_id, "source": row.source[:1024],
                    "category": row.category[:self._category_chars], "chunk_no": row.chunk_no,
                    "heading": row.heading[:1024], "text": row.text[:MAX_TEXT]}
            if self._dense_dim is not None:
                if row.dense is None or len(row.dense) != self._dense_dim:
                    raise VectorStoreError(f"chunk {row.chunk_id} has no {self._dense_dim}-d vector")
                item["dense"] = row.dense
            if not self._milvus_bm25:
                item["sparse"] = _PLACEHOLDER
            data.append(item)
        def write(client: Any) -> None:
            client.upsert(self._collection, data, timeout=self._timeout)
            # Lite rebuilds BM25 statistics per query until the segment is flushed (DESIGN.md).
            client.flush(self._collection, timeout=self._timeout)

        self._write(f"cannot write {len(rows)} chunks to Milvus", write)

    def delete_document(self, doc_id: int) -> None:
        what = f"cannot delete the vectors of document {doc_id}"
        if self._fulltext is not None:
            with self._milvus(what):
                self._fulltext.delete_document(doc_id)
        self._write(what, lambda client: client.delete(self._collection, filter=f"doc_id == {int(doc_id)}",
                                                       timeout=self._timeout))

    def delete_chunks_from(self, doc_id: int, first_chunk_no: int) -> None:
        """Drop a document's chunks numbered `first_chunk_no` and up (left over from a longer version)."""
        what = f"cannot delete stale chunks of document {doc_id}"
        if self._fulltext is not None:
            with self._milvus(what):
                self._fulltext.delete_chunks_from(doc_id, first_chunk_no)
        stale = f"doc_id == {int(doc_id)} and chunk_no >= {int(first_chunk_no)}"
        self._write(what, lambda client: client.delete(self._collection, filter=stale, timeout=self._timeout))

    def _write(self, what: str, call: Callable[[Any], None]) -> None:
        """Run one write. A follower whose owner closed the Lite directory while the call was in flight (the
        owner's last store released it) opens the directory again - maybe as its new owner - and writes once
        more: every write here is idempotent (upsert by key, delete by filter)."""
        with self._milvus(what), self._writing():
            session = self._session
            try:
                call(self.client())
                return
            except Exception:
                if session is None or session.is_owner or not session.owner_gone():
                    raise
                log.warning("the Milvus Lite owner %s closed %s during a write; opening it again and retrying once",
                            session.owner.describe() if session.owner else "?", self._uri)
            call(self.client())

    def _writing(self) -> contextlib.AbstractContextManager[None]:
        return writing(self._uri, self._timeout) if is_local_uri(self._uri) else contextlib.nullcontext()

    # -- reads ---------------------------------------------------------------------------------------
    def chunks_of(self, doc_id: int, *, with_vectors: bool = False) -> list[ChunkRow]:
        if self._fulltext is not None and not with_vectors:
            with self._milvus(f"cannot read the chunks of document {doc_id}"):
                return self._fulltext.chunks_of(doc_id)
        fields = _OUTPUT + (["dense"] if with_vectors and self._dense_dim is not None else [])
        with self._milvus(f"cannot read the chunks of document {doc_id}"):
            rows = self.client().query(self._collection, filter=f"doc_id == {int(doc_id)}", output_fields=fields,
                                       consistency_level="Strong", limit=16384,
                                       timeout=self._timeout)
        chunks = [self._row(r) for r in rows]
        return sorted(chunks, key=lambda c: c.chunk_no)

    def document_ids(self) -> set[int]:
        """Every document id with chunks in the collection (iterates: no row limit)."""
        ids: set[int] = set()
        with self._milvus("cannot list documents in Milvus"):
            iterator = self.client().query_iterator(self._collection, batch_size=5000, filter="doc_id >= 0",
                                                    output_fields=["doc_id"], consistency_level="Strong")
            try:
                while batch := iterator.next():
                    ids.update(int(r["doc_id"]) for r in batch)
            finally:
                iterator.close()
        return ids

    def chunk_keys(self) -> list[tuple[int, int]]:
        """(doc_id, chunk_no) of every chunk in the collection (iterates: no row limit)."""
        keys: list[tuple[int, int]] = []
        with self._milvus("cannot list chunks in Milvus"):
            iterator = self.client().query_iterator(self._collection, batch_size=5000, filter="doc_id >= 0",
                                                    output_fields=["doc_id", "chunk_no"], consistency_level="Strong")
            try:
                while batch := iterator.next():
                    keys.extend((int(r["doc_id"]), int(r["chunk_no"])) for r in batch)
            finally:
                iterator.close()
        if self._fulltext is not None:  # chunks left in either index count: reconcile removes them from both
            with self._milvus("cannot list chunks in the full-text index"):
                keys = sorted(set(keys) | set(self._fulltext.chunk_keys()))
        return keys

    def server_version(self) -> str:
        """What the Milvus server (or Lite) reports as its version."""
        with self._milvus("cannot ask Milvus for its version"):
            return str(self.client().get_server_version(timeout=self._timeout))

    def count_chunks(self) -> int:
        with self._milvus("cannot count chunks in Milvus"):
            rows = self.client().query(self._collection, filter="", output_fields=["count(*)"],
                                       consistency_level="Strong", timeout=self._timeout)
        return int(rows[0]["count(*)"]) if rows else 0

    def search_bm25(self, query: str, *, limit: int, category: str | None = None,
                    doc_ids: Collection[int] | None = None) -> list[ScoredChunk]:
        if doc_ids is not None and not doc_ids:
            return []
        if self._fulltext is not None:
            with self._milvus("full-text search failed"):
                return self._fulltext.search(query, limit, category, doc_ids=doc_ids)
        self.client()  # opened first: whether the collection computes BM25 is read at open
        if not self._milvus_bm25:
            raise VectorStoreError(f"the Milvus collection {self._collection} at {self._uri} was made beside a "
                                   "full-text index and has no BM25 of its own: set KB_FULLTEXT=sqlite (or auto "
                                   "with Milvus Lite), or rebuild the collection")
        hits = self._search([query], "sparse", {"metric_type": "BM25"}, limit, category, doc_ids)
        # Milvus Lite reports BM25 as negative distances; a server reports positive scores.
        return [ScoredChunk(self._row(h), abs(float(h["distance"]))) for h in hits]

    def document_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int] | None:
        """From the SQLite FTS5 vocabulary; Milvus' own BM25 does not expose its term statistics (None)."""
        if self._fulltext is None:
            return None
        with self._milvus("read term statistics"):
            return self._fulltext.document_frequencies(terms)

    def search_dense(self, vector: list[float], *, limit: int, category: str | None = None,
                     doc_ids: Collection[int] | None = None) -> list[ScoredChunk]:
        if self._dense_dim is None or (doc_ids is not None and not doc_ids):
            return []
        params = {"metric_type": "COSINE", "params": {"ef": max(128, limit)}}
        hits = self._search([vector], "dense", params, limit, category, doc_ids)
        return [ScoredChunk(self._row(h), float(h["distance"])) for h in hits]

    def _search(self, data: list[Any], field: str, params: dict, limit: int, category: str | None,
                doc_ids: Collection[int] | None = None) -> list[Any]:
        if doc_ids is not None and len(doc_ids) > FILTER_IDS:
            # A long `doc_id in [...]` costs Milvus Lite more than the search (it parses and checks the list per
            # chunk: 160 ms a question at 6,700 ids). Most scopes admit most documents: their best chunks come
            # from a few times the limit unfiltered; only when too few of those are in scope is the list sent.
            allowed = doc_ids if isinstance(doc_ids, (set, frozenset)) else set(doc_ids)
            for factor in OVERFETCH:  # a narrow scope (a language, one folder) may need the wider second look
                wide = min(16384, limit * factor)
                hits = self._search(data, field, params, wide, category, None)
                kept = [h for h in hits if int((h.get("entity") or h)["doc_id"]) in allowed]
                if len(kept) >= limit or len(hits) < wide:
                    return kept[:limit]
        kwargs: dict[str, Any] = {"anns_field": field, "limit": limit, "search_params": params,
                                  "output_fields": _OUTPUT, "consistency_level": "Strong"}
        filters = []
        cut = bool(category) and len(category) > self._category_chars
        if category:  # a collection that keeps less of a category matches on what it keeps, then on the path
            filters.append(f'category == "{_escape(category[:self._category_chars])}"')
            if cut:  # other folders with the same beginning come back too: ask for more, keep the right ones
                kwargs["limit"] = min(16384, limit * 4)
        if doc_ids is not None:  # integers only: nothing of a caller's text reaches the expression
            filters.append(f"doc_id in [{', '.join(str(int(d)) for d in sorted(doc_ids))}]")
        if filters:
            kwargs["filter"] = " and ".join(filters)
        kwargs["timeout"] = self._timeout
        started = time.monotonic()
        with self._milvus(f"Milvus {field} search failed"):
            try:
                result = self.client().search(self._collection, data=data, **kwargs)
            except Exception as exc:  # noqa: BLE001
                spent = time.monotonic() - started
                if not self._recoverable(exc) or spent >= self._timeout / 2:
                    raise  # a frozen server already cost most of the timeout: one timeout per call, not two
                # A restarted Milvus server brings the collection back "released", or our connection is
                # stale: load it again (or reconnect) and retry once, instead of failing until a restart.
                self._reconnect(exc)
                kwargs["timeout"] = max(0.5, self._timeout - (time.monotonic() - started))
                result = self.client().search(self._collection, data=data, **kwargs)
        hits = list(result[0]) if result else []
        if cut:
            hits = [h for h in hits if _in_folder((h.get("entity") or h)["source"], category)][:limit]
        return hits

    @staticmethod
    def _recoverable(exc: Exception) -> bool:
        text = str(exc).lower()
        return any(word in text for word in ("released", "not loaded", "unavailable", "connect", "closed",
                                              "not exist", "collection not found"))

    def _reconnect(self, exc: Exception) -> None:
        log.warning("Milvus at %s failed (%s); reloading the collection and retrying once", self._uri, exc)
        with self._lock:
            client = self._client
            if client is not None:
                try:
                    client.load_collection(self._collection, timeout=self._timeout)
                    return
                except Exception:  # noqa: BLE001 - the connection itself is gone: make a new one
                    self._drop_client()
        self.client()

    @staticmethod
    def _row(hit: Any) -> ChunkRow:
        # search hits nest the fields under "entity"; query rows are the fields themselves
        entity = hit.get("entity") or hit
        dense = entity.get("dense")
        return ChunkRow(
            doc_id=int(entity["doc_id"]),
            source=str(entity["source"]),
            category=str(entity["category"]),
            chunk_no=int(entity["chunk_no"]),
            heading=str(entity["heading"]),
            text=str(entity["text"]),
            dense=[float(x) for x in dense] if dense is not None else None,
        )


def _varchar_length(description: dict, field: str) -> int | None:
    """A VARCHAR field's max_length from `describe_collection` (None when it cannot be read)."""
    for item in description.get("fields", ()):
        if item.get("name") == field:
            try:
                return int(item.get("params", {}).get("max_length"))
            except (TypeError, ValueError):
                return None
    return None


def _in_folder(source: str, category: str) -> bool:
    """Whether a chunk's display path (`<base>/<category>/<file>.md`) lies directly in `category`."""
    folder = source.rsplit("/", 1)[0]
    return folder == category or folder.endswith(f"/{category}")
