"""`kb.keywords`: the keyword map, the documents a keyword brings, keyword edits across documents and the
synonym groups, for one actor. A reader limited to some audiences sees the map of its pages alone (rows,
claimants, hits and overlaps counted over them); edits are for curators and go through `kb.documents`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kb_core.access import Role
from kb_core.errors import InvalidInputError
from kb_core.keywords.map import KeywordHit, KeywordMap, keyword_hits, keyword_map
from kb_core.services.keyword_plan import REMOVE, RENAME, KeywordPlan, KeywordPlanReport

if TYPE_CHECKING:
    import numpy as np

    from kb_core.documents.document_edit import FrontmatterEdit
    from kb_core.jobs.runner import Work
    from kb_core.progress import Progress
    from kb_core.services.acting import Acting
    from kb_core.services.documents import Documents
    from kb_core.services.editing import EditingService
    from kb_core.services.parts import Parts


class Keywords:
    def __init__(self, parts: Parts, editing: EditingService, documents: Documents, acting: Acting):
        self._parts = parts
        self._index = parts.index
        self._editing = editing
        self._documents = documents
        self._acting = acting

    def _allowed(self, snapshot: Any) -> np.ndarray | None:
        return None if not self._acting.limited else self._index.scope_mask(self._acting.scope, snapshot)

    def map(self) -> KeywordMap:
        """The keyword map with L0's own predictions: clashes, overlaps, generic and weak keywords."""
        snapshot = self._index.snapshot
        return keyword_map(snapshot, self._allowed(snapshot))

    def documents(self, keyword: str, limit: int = 200) -> list[KeywordHit]:
        """The documents a query of just `keyword` returns from L0, ranked, with the keywords that matched."""
        snapshot = self._index.snapshot
        return keyword_hits(snapshot, keyword, limit, self._allowed(snapshot))

    def of(self, file_path: str) -> tuple[str, ...]:
        """The keywords a document's frontmatter lists on disk, as written."""
        self._acting.check_readable(file_path)  # a page the actor may not read is no page: the same refusal
        return self._editing.keywords(file_path)

    # -- edits across documents ----------------------------------------------------------------------------
    def prepare_addition(self, file_path: str, keyword: str) -> FrontmatterEdit:
        """The document with `keyword` added after its keywords, as a prepared edit. Curators only."""
        self._acting.require(Role.CURATOR, "edit documents")
        self._acting.check_readable(file_path)
        return self._editing.keyword_addition(file_path, keyword)

    def prepare_rename(self, keyword: str, new_keyword: str) -> KeywordPlan:
        """A plan renaming `keyword` in every document whose frontmatter lists it: per document its keywords
        before and after and the prepared edit, and the lint of the whole operation. Writes nothing (`apply` or
        `kb.jobs.start("keyword_plan", plan=...)` do). Curators only."""
        self._acting.require(Role.CURATOR, "edit documents")
        return self._editing.plan(RENAME, keyword, new_keyword, made_by=self._acting.actor.name)

    def prepare_removal(self, keyword: str) -> KeywordPlan:
        """A plan removing `keyword` from every document whose frontmatter lists it. Curators only."""
        self._acting.require(Role.CURATOR, "edit documents")
        return self._editing.plan(REMOVE, keyword, None, made_by=self._acting.actor.name)

    def apply(self, plan: KeywordPlan, *, progress: Progress | None = None) -> KeywordPlanReport:
        """Apply a plan in the calling thread, document by document through `kb.documents.save_edit` (each saved,
        skipped with the reason or failed; the others go on). Curators only."""
        self._check_plan(plan)
        return self._editing.apply(plan, self._documents.save_edit, progress)

    def plan_job(self, plan: KeywordPlan | None) -> tuple[dict[str, Any], Work, int]:
        """A plan as a job's parameters, work and total (the job registry's `keyword_plan` kind)."""
        if plan is None:
            raise InvalidInputError("a keyword plan job needs the plan (kb.keywords.prepare_rename / _removal)")
        self._check_plan(plan)
        return self._editing.plan_job(plan, self._documents.save_edit)

    def _check_plan(self, plan: object) -> None:
        if not isinstance(plan, KeywordPlan):
            raise InvalidInputError(f"expected a KeywordPlan, got {type(plan).__name__}")
        self._acting.require(Role.CURATOR, "edit documents")

    # -- synonyms ------------------------------------------------------------------------------------------
    def synonyms(self) -> tuple[tuple[str, ...], ...]:
        """The synonym groups L0 applies (`_synonyms.yaml` in the knowledge base, then `l0.synonyms`)."""
        return self._index.synonyms()

    def synonym_warnings(self, groups: Sequence[Sequence[str]]) -> list[str]:
        """What a curator should know before saving these groups (a generic keyword among them)."""
        return self._editing.synonym_warnings(groups)

    def save_synonyms(self, text_or_groups: str | Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
        """Replace `_synonyms.yaml` (one group per line, words separated by commas; or a list of groups) and
        apply it; the groups from settings stay. Curators only. Returns the groups saved."""
        with self._acting.writing(Role.CURATOR, "edit synonyms", "synonyms"):  # the role before the text is read
            groups = self._editing.synonym_groups(text_or_groups)
            self._editing.save_synonyms(self._parts.synonyms_file, groups)
        return groups
