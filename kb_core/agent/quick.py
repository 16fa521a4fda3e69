"""An L0 answer from the files alone, for a process that asks one question and exits (`kb lookup`).

Opening the whole knowledge base costs seconds (the database and its migrations, Milvus Lite, jieba, the
model); a question whose answer is one keyword's page needs none of it. `answer_from_l0` builds only the L0
index (from the saved snapshot) and runs the very tool the knowledge base runs (`LookupTool`, the same
`HybridLookup` and payload) with an L1 that only notes it was asked. The answer stands when L1 was not asked
and the tree is exactly as the snapshot recorded it (a process that closed cleanly wrote it: no write is in
flight or waiting for recovery); otherwise the caller opens the knowledge base and asks again. The call goes
to the call spool, which the next process with the database moves into the call log."""

from __future__ import annotations

import logging
from typing import Any

from kb_core.agent.tool import LookupTool, stamped
from kb_core.documents.folder import KnowledgeFolder
from kb_core.documents.scope import ALL, AudienceRule, Scope
from kb_core.errors import InvalidInputError
from kb_core.keywords.index import KnowledgeIndex
from kb_core.ops.logs import log_context, new_request_id
from kb_core.retrieval.lookup import HybridLookup, L1Hit
from kb_core.settings import Settings
from kb_core.storage.call_spool import spool_at

log = logging.getLogger(__name__)


class _L1Asked(BaseException):
    """Raised into the lookup when it turns to L1: this answer needs the whole knowledge base. Not an
    `Exception`: the tool turns those into an error answer, and this must leave the lookup unanswered."""


class _NoL1:
    def search(self, query: str, top_k: int = 3, category: str | None = None, **_scope: Any) -> list[L1Hit]:
        raise _L1Asked


class _Held:
    """The call's record, kept until the answer is known to stand."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def record(self, **fields: Any) -> None:
        self.records.append(stamped(fields))


def _service_scope(settings: Settings) -> Scope | None:
    """What the service identity reads, as the opened knowledge base decides it (`KB_SERVICE_AUDIENCES`, the
    folders' defaults of `auth.audiences`); None when the settings do not say it plainly: the opened knowledge
    base then answers, or reports the setting."""
    if settings.service_audiences is None:
        return ALL
    try:
        rule = AudienceRule.of_mapping(settings.audiences)
    except InvalidInputError:
        return None
    return Scope(audiences=frozenset(settings.service_audiences), rule=rule)


def answer_from_l0(settings: Settings, query: object, section_title: object = None, *,
                   caller: str = "cli", filters: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The agent payload of `lookup_knowledge(query, section_title)` when L0 alone answers it and the files
    are as the L0 snapshot saved them; `None` when the whole knowledge base must answer (nothing recorded)."""
    scope = _service_scope(settings)
    if scope is None or settings.l0_snapshot_path is None or not settings.l0_snapshot_path.is_file():
        return None
    folder = KnowledgeFolder(settings.base_path, app_root=settings.app_root, max_bytes=settings.max_upload_bytes)
    index = KnowledgeIndex(folder=folder, matching=settings.l0_matching, generic_docs=settings.l0_generic_docs,
                           synonyms=settings.l0_synonyms, snapshot_path=settings.l0_snapshot_path)
    report = index.scan()
    if not report.as_saved:
        index.discard()  # the knowledge base opened next saves what changed (and warns of an empty folder)
        return None
    held = _Held()
    tool = LookupTool(HybridLookup(index, _NoL1(), default_language=settings.default_language), held)
    try:
        with log_context(request_id=new_request_id(), caller=caller):
            response = tool.call({"query": query, "section_title": section_title, **(filters or {})}, caller=caller,
                                 scope=scope)
    except _L1Asked:
        return None
    spool_at(settings.app_root).record_tool_calls(held.records)
    if (empty := folder.empty_warning(report.scanned)) is not None:  # answered here: the opening's warning, here
        log.warning("%s", empty)
    return response.payload
