"""The facade's editing in place (a mixin of `KnowledgeBase`): frontmatter fields rewritten byte for byte through
the upload path, the keyword map's bulk plans, the fix offered for a query that needs attention, and the synonym
groups. Every write goes through `upload` or `_writing`, which check the acting user's role."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from kb_core.access import Role
from kb_core.agent.tool import check_query_length
from kb_core.documents.document_edit import FrontmatterEdit, check_unchanged, current_fields, prepare_frontmatter_edit
from kb_core.documents.frontmatter_edit import FrontmatterFields, clean_keywords
from kb_core.documents.language import query_language
from kb_core.documents.synonyms import clean_groups, parse_lines
from kb_core.errors import InvalidInputError
from kb_core.progress import Progress
from kb_core.retrieval.attention import DocumentSuggestion, suggest_documents
from kb_core.retrieval.keyword_plan import REMOVE, RENAME, KeywordPlan, build_plan, checked_operation, keyword_findings
from kb_core.terms import normalize_term

if TYPE_CHECKING:
    from kb_core.access import Actor
    from kb_core.documents.service import UploadOutcome
    from kb_core.retrieval.keyword_index import KnowledgeIndex
    from kb_core.retrieval.l1_search import VectorSearcher
    from kb_core.settings import Settings


class EditingFacade:
    """Mixed into `KnowledgeBase`; uses its actor, settings, L0 index, L1 searcher and writes."""

    _actor: Actor
    _settings: Settings
    _index: KnowledgeIndex
    _searcher: VectorSearcher
    upload: Callable[..., UploadOutcome]
    document_keywords: Callable[[str], tuple[str, ...]]
    _writing: Callable[[Role, str, str], AbstractContextManager[None]]

    # -- editing frontmatter in place ----------------------------------------------------------------------------
    def frontmatter_fields(self, file_path: str) -> FrontmatterFields:
        """The editable fields of a document's frontmatter on disk now: title, summary, keywords and sections
        (`exists` False: the file has no frontmatter block; an edit adds one). A block that is not valid YAML
        raises `FrontmatterError` with the parser's reason."""
        return current_fields(self._index, file_path, max_bytes=self._settings.max_upload_bytes)

    def prepare_frontmatter_edit(self, file_path: str, *, title: str | None = None, summary: str | None = None,
                                 keywords: Sequence[str] | None = None,
                                 sections: Mapping[str, str] | Sequence[tuple[str, str]] | None = None
                                 ) -> FrontmatterEdit:
        """The document rewritten with new values of the given fields (None: left alone; `sections` as a mapping
        or (name, heading line) pairs, emptied: the key is removed), every other byte as it was, with the upload
        preview, the lint (the Upload page's, and a generic keyword or one inside longer keywords of other
        documents) and a diff of the frontmatter (`FrontmatterEdit`). Writes nothing. A value the file cannot
        hold as given, or a frontmatter block that is not valid YAML, raises `FrontmatterError`; a path that is no
        document's, `UploadRejected`. Curators only."""
        self._actor.require(Role.CURATOR, "edit documents")
        edit = prepare_frontmatter_edit(self._index, file_path, title=title, summary=summary, keywords=keywords,
                                        sections=sections, max_bytes=self._settings.max_upload_bytes)
        if not edit.added:
            return edit
        extra = keyword_findings(self._index.view, edit.added, edit.file_path)
        return dataclasses.replace(edit, preview=dataclasses.replace(
            edit.preview, findings=edit.preview.findings + extra)) if extra else edit

    def save_frontmatter_edit(self, edit: FrontmatterEdit, *, progress: Progress | None = None) -> UploadOutcome:
        """Write a prepared edit through the normal upload path (validation, the atomic write to disk, database,
        Milvus and L0), unless the file changed since it was prepared: then `EditConflictError` (a
        `DocumentConflictError`), and nothing is written. Curators only."""
        if not isinstance(edit, FrontmatterEdit):
            raise InvalidInputError(f"expected a prepared FrontmatterEdit, got {type(edit).__name__}")
        self._actor.require(Role.CURATOR, "edit documents")
        check_unchanged(self._index, edit)  # a clear message before any work; if_match closes the race
        return self.upload(edit.file_name, edit.data, edit.category, progress=progress, if_match=edit.base_sha256)

    def prepare_keyword_addition(self, file_path: str, keyword: str) -> FrontmatterEdit:
        """The document with `keyword` added after its keywords (a "needs attention" query made a keyword), as a
        prepared edit; a document without frontmatter gets a block holding it. Curators only."""
        added = clean_keywords([keyword]) if isinstance(keyword, str) else ()
        if not added:
            raise InvalidInputError("the keyword to add is empty")
        current = self.frontmatter_fields(file_path)
        return self.prepare_frontmatter_edit(file_path, keywords=(*current.keywords, *added))

    # -- bulk keyword operations (the keyword map) -----------------------------------------------------------------
    def prepare_keyword_rename(self, keyword: str, new_keyword: str) -> KeywordPlan:
        """A plan renaming `keyword` to `new_keyword` in every document whose frontmatter lists it (the renamed one
        keeps its place; a duplicate it makes is dropped): per document its keywords before and after and the
        prepared in-place edit with its upload preview, and the lint of the whole operation (a clash or generic
        keyword it makes, a weak new keyword). Writes nothing; `apply_keyword_plan` does. Curators only."""
        return self._keyword_plan(RENAME, keyword, new_keyword)

    def prepare_keyword_removal(self, keyword: str) -> KeywordPlan:
        """A plan removing `keyword` from every document whose frontmatter lists it (see `prepare_keyword_rename`).
        Curators only."""
        return self._keyword_plan(REMOVE, keyword, None)

    def _keyword_plan(self, operation: str, keyword: str, new_keyword: str | None) -> KeywordPlan:
        self._actor.require(Role.CURATOR, "edit documents")
        keyword, new_keyword = checked_operation(operation, keyword, new_keyword)
        max_bytes = self._settings.max_upload_bytes

        def prepare(file_path: str, keywords: tuple[str, ...]) -> FrontmatterEdit:
            return prepare_frontmatter_edit(self._index, file_path, keywords=keywords, max_bytes=max_bytes)

        return build_plan(self._index.view, operation, keyword, new_keyword, self.document_keywords, prepare,
                          made_by=self._actor.name)

    # -- needs attention: the fix ----------------------------------------------------------------------------------
    def suggest_documents(self, query: str, limit: int = 5) -> list[DocumentSuggestion]:
        """The documents L1 finds for `query`, best first (the first is "the document L1 finds"): the same search
        and relevance check the agents' lookup runs, L1 alone, not logged as a tool call. At most `limit`
        (1-20)."""
        check_query_length(query)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 20:
            raise InvalidInputError(f"limit must be a whole number from 1 to 20, not {limit!r}")

        def title_of(file_path: str) -> str:
            entry = self._index.get(file_path)
            return entry.title if entry is not None and entry.title else file_path.rpartition("/")[2]

        language = query_language(query, self._settings.default_language)

        def in_language(file_path: str) -> bool:
            entry = self._index.get(file_path)
            return entry is None or entry.lang in (language, "und")

        return suggest_documents(self._searcher, query, limit, title_of, in_language)

    # -- synonyms ------------------------------------------------------------------------------------
    def synonyms(self) -> tuple[tuple[str, ...], ...]:
        """The synonym groups L0 applies (`_synonyms.yaml` in the knowledge base, then `l0.synonyms`)."""
        return self._index.synonyms()

    def synonym_warnings(self, groups: Sequence[Sequence[str]]) -> list[str]:
        """What a curator should know before saving these groups: a word that is itself a generic keyword
        would make every page claiming it an answer to each synonym."""
        snapshot = self._index.snapshot
        warnings = []
        for group in groups:
            for word in group:
                term_id = snapshot.term_id.get(normalize_term(word))
                if term_id is not None and snapshot.is_generic(snapshot.df[term_id]):
                    warnings.append(f"“{word}” is a generic keyword (claimed by {snapshot.df[term_id]} pages): as a "
                                    "synonym it makes all of them answer every word of its group")
        return warnings

    def save_synonyms(self, text_or_groups: str | Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
        """Replace `_synonyms.yaml` (one group per line, words separated by commas; or a list of groups) and
        apply it; the groups from settings stay. Curators only. Returns the groups saved."""
        self._actor.require(Role.CURATOR, "edit synonyms")
        groups = parse_lines(text_or_groups) if isinstance(text_or_groups, str) else \
            clean_groups([list(g) for g in text_or_groups], "synonyms")
        with self._writing(Role.CURATOR, "edit synonyms", "synonyms"):
            self._index.save_synonyms(groups)
        return groups
