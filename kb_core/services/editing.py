"""Editing in place: frontmatter fields rewritten byte for byte through the upload path, the keyword map's bulk
plans (rename or remove a keyword everywhere), the fix offered for a query that needs attention, and the synonym
groups. Every write goes through the facade's own writes it hands over (`upload`, `save`), which check the
acting user's role and record who wrote."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from kb_core.agent.tool import check_query_length
from kb_core.documents.document_edit import (
    FrontmatterEdit,
    check_unchanged,
    current_fields,
    current_keywords,
    prepare_frontmatter_edit,
)
from kb_core.documents.frontmatter_edit import FrontmatterFields, clean_keywords
from kb_core.documents.language import query_language
from kb_core.documents.scope import ALL, Scope
from kb_core.documents.synonyms import SynonymsFile, clean_groups, parse_lines
from kb_core.errors import DocumentConflictError, InvalidInputError, KnowledgeBaseError
from kb_core.jobs.runner import Work
from kb_core.jobs.work import keyword_plan_work
from kb_core.progress import Progress
from kb_core.retrieval.attention import DocumentSuggestion, suggest_documents
from kb_core.retrieval.scoped_documents import source_admitted
from kb_core.services.keyword_plan import (
    KeywordPlan,
    KeywordPlanReport,
    PlanItem,
    PlanOutcome,
    build_plan,
    checked_operation,
    keyword_findings,
)
from kb_core.terms import normalize_term

if TYPE_CHECKING:
    from kb_core.documents.service import UploadOutcome
    from kb_core.keywords.index import KnowledgeIndex
    from kb_core.retrieval.l1_search import VectorSearcher
    from kb_core.retrieval.lookup import L1Hit

Upload = Callable[..., "UploadOutcome"]  # the facade's `upload`, acting for the user
Save = Callable[[FrontmatterEdit], "UploadOutcome"]  # the facade's `save_frontmatter_edit`


class EditingService:
    def __init__(self, index: KnowledgeIndex, searcher: VectorSearcher, *, default_language: str):
        self._index = index
        self._searcher = searcher
        self._default_language = default_language

    # -- frontmatter in place ----------------------------------------------------------------------------------
    def fields(self, file_path: str) -> FrontmatterFields:
        return current_fields(self._index, file_path)

    def keywords(self, file_path: str) -> tuple[str, ...]:
        return current_keywords(self._index, file_path)

    def prepare(self, file_path: str, *, title: str | None = None, summary: str | None = None,
                keywords: Sequence[str] | None = None,
                sections: Mapping[str, str] | Sequence[tuple[str, str]] | None = None) -> FrontmatterEdit:
        """The edit with its upload preview and lint; the lint also names a keyword the edit adds that is
        generic, or inside longer keywords of other documents."""
        edit = prepare_frontmatter_edit(self._index, file_path, title=title, summary=summary, keywords=keywords,
                                        sections=sections)
        if not edit.added:
            return edit
        extra = keyword_findings(self._index.view, edit.added, edit.file_path)
        return dataclasses.replace(edit, preview=dataclasses.replace(
            edit.preview, findings=edit.preview.findings + extra)) if extra else edit

    def save(self, edit: FrontmatterEdit, upload: Upload, progress: Progress | None = None) -> UploadOutcome:
        if not isinstance(edit, FrontmatterEdit):
            raise InvalidInputError(f"expected a prepared FrontmatterEdit, got {type(edit).__name__}")
        check_unchanged(self._index, edit)  # a clear message before any work; if_match closes the race
        extra = {} if progress is None else {"progress": progress}
        return upload(edit.file_name, edit.data, edit.category, if_match=edit.base_sha256, **extra)

    def keyword_addition(self, file_path: str, keyword: str) -> FrontmatterEdit:
        added = clean_keywords([keyword]) if isinstance(keyword, str) else ()
        if not added:
            raise InvalidInputError("the keyword to add is empty")
        current = self.fields(file_path)
        return self.prepare(file_path, keywords=(*current.keywords, *added))

    # -- keyword plans (the keyword map's bulk rename or removal) -----------------------------------------------
    def plan(self, operation: str, keyword: str, new_keyword: str | None, *, made_by: str) -> KeywordPlan:
        keyword, new_keyword = checked_operation(operation, keyword, new_keyword)

        def prepare(file_path: str, keywords: tuple[str, ...]) -> FrontmatterEdit:
            return prepare_frontmatter_edit(self._index, file_path, keywords=keywords)

        return build_plan(self._index.view, operation, keyword, new_keyword, self.keywords, prepare,
                          made_by=made_by)

    def apply(self, plan: KeywordPlan, save: Save, progress: Progress | None = None) -> KeywordPlanReport:
        """Document by document in the calling thread: each saved, skipped with the reason (not ready, or its
        file changed since the plan was made) or failed (nothing of it written); the others go on."""
        report = progress or (lambda stage, done, total: None)
        outcomes = []
        total = len(plan.items)
        for done, item in enumerate(plan.items):
            report("editing", done, total)
            outcomes.append(PlanOutcome(item.file_path, *self._apply_item(item, save)))
        report("done", total, total)
        return KeywordPlanReport(plan, tuple(outcomes))

    @staticmethod
    def _apply_item(item: PlanItem, save: Save) -> tuple[str, str]:
        """(outcome, detail) of one document of a plan: saved, skipped or failed."""
        if not item.ready:
            return "skipped", item.reason
        try:
            outcome = save(item.edit)
        except DocumentConflictError as exc:
            return "skipped", str(exc)
        except KnowledgeBaseError as exc:
            return "failed", str(exc)
        return "saved", f"{outcome.action}: keywords {', '.join(item.after) or '(none)'}"

    def plan_job(self, plan: KeywordPlan, save: Save) -> tuple[dict[str, Any], Work, int]:
        """A plan as a job: its parameters (the items as plain values, stored with the job), work and total."""
        params = {"operation": plan.operation, "keyword": plan.keyword, "new_keyword": plan.new_keyword,
                  "plan": plan.describe(), "made_by": plan.made_by,
                  "made_at": plan.made_at.isoformat() if plan.made_at else None,
                  "items": [{"file_path": item.file_path, "before": list(item.before), "after": list(item.after),
                             "ready": item.ready, "reason": item.reason,
                             "base_sha256": item.edit.base_sha256 if item.edit is not None else None}
                            for item in plan.items]}
        what = plan.describe().rpartition(" in ")[0]
        work = keyword_plan_work(plan.items, lambda item: self._apply_item(item, save), plan.describe(), what)
        return params, work, len(plan.items)

    # -- needs attention: the fix --------------------------------------------------------------------------------
    def suggest_documents(self, query: str, limit: int = 5, scope: Scope = ALL,
                          doc_ids: Collection[int] | None = None) -> list[DocumentSuggestion]:
        """L1's documents for `query` in its language, best first: the agents' search and relevance check.
        `scope`: only the documents it admits, searched within `doc_ids` (theirs) as a scoped lookup is."""
        check_query_length(query)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 20:
            raise InvalidInputError(f"limit must be a whole number from 1 to 20, not {limit!r}")

        def title_of(file_path: str) -> str:
            entry = self._index.get(file_path)
            return entry.title if entry is not None and entry.title else file_path.rpartition("/")[2]

        language = query_language(query, self._default_language)

        def in_language(file_path: str) -> bool:
            entry = self._index.get(file_path)
            return entry is None or entry.lang in (language, "und")

        searcher: Any = self._searcher
        if not scope.everything:
            def within(text: str, top_k: int = 3, category: str | None = None) -> list[L1Hit]:
                # the id set may be a moment old (as a lookup's): each passage's page is checked against L0 now
                return [h for h in self._searcher.search(text, top_k=top_k, category=category, doc_ids=doc_ids or ())
                        if source_admitted(self._index, scope, h.source)]

            searcher = SimpleNamespace(search=within)
        return suggest_documents(searcher, query, limit, title_of, in_language)

    # -- synonyms --------------------------------------------------------------------------------------------
    def synonym_warnings(self, groups: Sequence[Sequence[str]]) -> list[str]:
        """A word that is itself a generic keyword would make every page claiming it an answer to each synonym."""
        snapshot = self._index.snapshot
        warnings = []
        for group in groups:
            for word in group:
                term_id = snapshot.term_id.get(normalize_term(word))
                if term_id is not None and snapshot.is_generic(snapshot.df[term_id]):
                    warnings.append(f"“{word}” is a generic keyword (claimed by {snapshot.df[term_id]} pages): as a "
                                    "synonym it makes all of them answer every word of its group")
        return warnings

    @staticmethod
    def synonym_groups(text_or_groups: str | Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
        return parse_lines(text_or_groups) if isinstance(text_or_groups, str) else \
            clean_groups([list(g) for g in text_or_groups], "synonyms")

    def save_synonyms(self, file: SynonymsFile, groups: tuple[tuple[str, ...], ...]) -> None:
        """Write the groups to the knowledge base's file, and apply them here at once (the followers of other
        processes read the file)."""
        file.save(groups)
        self._index.use_synonyms(groups)
