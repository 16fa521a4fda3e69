"""Bulk keyword operations from the keyword map — rename a keyword across the documents that claim it, or remove
it from them — as a plan that is previewed first and then applied document by document; and the lint of a
keyword edit that only L0 itself can tell (a generic keyword, a keyword inside longer ones of other documents).

A plan holds one prepared frontmatter edit per document (`document_edit.prepare_frontmatter_edit`: the file
rewritten in place, its upload preview), made from the file on disk when the plan was made. Applying it saves
each edit through the normal upload path; a document whose file changed since the plan is skipped with the
reason (`EditConflictError`), and the others go on. Nothing here writes: `KnowledgeBase.apply_keyword_plan` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from kb_core.documents.document_edit import FrontmatterEdit
from kb_core.documents.frontmatter_edit import clean_keywords
from kb_core.documents.lint import ERROR, INFO, WARNING, Finding
from kb_core.errors import InvalidInputError, KnowledgeBaseError
from kb_core.keywords.entry import split_keywords
from kb_core.keywords.matching import L0View
from kb_core.terms import normalize_term, weak_keyword_reason

__all__ = ["KeywordPlan", "KeywordPlanReport", "PlanItem", "PlanOutcome", "documents_claiming", "keyword_findings",
           "new_keywords", "plan_findings"]

MAX_NAMED = 5  # documents named in one finding, then a count
RENAME, REMOVE = "rename", "remove"


@dataclass(frozen=True)
class PlanItem:
    """One document of a plan: its keywords before and after, and the prepared edit (None: it cannot be edited,
    `problem` says why)."""

    file_path: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    edit: FrontmatterEdit | None
    problem: str | None = None
    notes: tuple[str, ...] = ()  # the edit's upload warnings this operation brings (not those of keywords it keeps)

    @property
    def ready(self) -> bool:
        """Whether applying the plan writes this document."""
        return self.problem is None and self.edit is not None and self.edit.changed and self.edit.preview.can_upload

    @property
    def reason(self) -> str:
        """Why the plan leaves this document alone ("" when it does not)."""
        if self.ready:
            return ""
        if self.problem:
            return self.problem
        if self.edit is not None and not self.edit.preview.can_upload:
            errors = [f.message for f in self.edit.preview.findings if f.severity == ERROR]
            return "the upload would be refused: " + "; ".join(errors)
        return "nothing to change"


@dataclass(frozen=True)
class KeywordPlan:
    """`rename` `keyword` to `new_keyword`, or `remove` it, in each document of `items`."""

    operation: str  # RENAME or REMOVE
    keyword: str
    new_keyword: str | None
    items: tuple[PlanItem, ...]
    findings: tuple[Finding, ...]  # what the operation does to L0 as a whole (clash, generic, overlap, weak)
    made_by: str = ""
    made_at: datetime | None = None

    @property
    def ready(self) -> tuple[PlanItem, ...]:
        return tuple(item for item in self.items if item.ready)

    def describe(self) -> str:
        """"rename “超时” to “超时排查” in 3 of 4 documents"."""
        what = (f"rename “{self.keyword}” to “{self.new_keyword}”" if self.operation == RENAME
                else f"remove “{self.keyword}”")
        count = len(self.ready)
        return f"{what} in {count} of {len(self.items)} document{'s' if len(self.items) != 1 else ''}"


@dataclass(frozen=True)
class PlanOutcome:
    """What applying a plan did to one document: `saved` (with the upload's action), `skipped` (left alone:
    not ready, or its file changed since the plan) or `failed` (the save raised; nothing of it was written)."""

    file_path: str
    status: str
    message: str


@dataclass(frozen=True)
class KeywordPlanReport:
    plan: KeywordPlan
    outcomes: tuple[PlanOutcome, ...]

    def _count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def saved(self) -> int:
        return self._count("saved")

    @property
    def skipped(self) -> int:
        return self._count("skipped")

    @property
    def failed(self) -> int:
        return self._count("failed")

    def summary(self) -> str:
        return (f"{self.plan.describe().split(' in ')[0]}: {self.saved} saved, {self.skipped} skipped, "
                f"{self.failed} failed")


# -- which documents, and their new keywords ----------------------------------------------------------------------
def documents_claiming(snapshot: L0View, keyword: str) -> list[str]:
    """The documents whose frontmatter lists `keyword` (normalised), weak or beyond the 64th included, by path."""
    term = normalize_term(keyword)
    found = {snapshot.entries[p].file_path for p in snapshot.claimed_by(term)}
    for entry in snapshot.live_entries():
        if entry.ignored_keywords and any(normalize_term(k) == term for k, _why in entry.ignored_keywords):
            found.add(entry.file_path)
    return sorted(found)


def new_keywords(before: Iterable[str], operation: str, keyword: str, new_keyword: str | None) -> tuple[str, ...]:
    """A document's keywords after the operation: a renamed keyword keeps its place (and a duplicate it makes
    is dropped), a removed one goes."""
    term = normalize_term(keyword)
    after = []
    for k in before:
        if normalize_term(k) != term:
            after.append(k)
        elif operation == RENAME and new_keyword:
            after.append(new_keyword)
    return clean_keywords(after)


def checked_operation(operation: str, keyword: object, new_keyword: object = None) -> tuple[str, str | None]:
    """(keyword, new keyword) cleaned, or `InvalidInputError` saying what is wrong."""
    if operation not in (RENAME, REMOVE):
        raise InvalidInputError(f"unknown keyword operation {operation!r}: rename or remove")
    if not isinstance(keyword, str) or not normalize_term(keyword):
        raise InvalidInputError("name the keyword to change")
    if operation == REMOVE:
        return keyword.strip(), None
    if not isinstance(new_keyword, str) or not new_keyword.strip():
        raise InvalidInputError("the new keyword is empty: to drop the keyword, remove it instead")
    cleaned = clean_keywords([new_keyword])
    if cleaned == (keyword.strip(),):
        raise InvalidInputError(f"“{keyword.strip()}” is already spelled that way: nothing to rename")
    return keyword.strip(), cleaned[0]


# -- lint ---------------------------------------------------------------------------------------------------------
def _named(paths: list[str]) -> str:
    shown = ", ".join(paths[:MAX_NAMED])
    return shown + (f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else "")


def _pages(snapshot: L0View, paths: Iterable[str]) -> int:
    """Pages among documents: a page's language versions count once (as L0 counts claimants)."""
    groups = set()
    for path in paths:
        pos = snapshot.position.get(path)
        groups.add(("g", int(snapshot.group_of[pos])) if pos is not None else ("p", path))
    return len(groups)


def _inside_longer(snapshot: L0View, keyword: str, outside: set[str]) -> list[str]:
    """Documents outside `outside` a bare query of `keyword` returns without claiming it (a longer keyword of
    theirs contains it): what makes the keyword ambiguous although nobody else claims it."""
    term = normalize_term(keyword)
    claimed = {snapshot.entries[p].file_path for p in snapshot.claimed_by(term)}
    found = []
    for match in snapshot.match(term)[:200]:
        path = match.entry.file_path
        if path not in outside and path not in claimed:
            found.append(path)
    return found


def keyword_findings(snapshot: L0View, keywords: Iterable[str], file_path: str) -> tuple[Finding, ...]:
    """What L0 makes of keywords added to one document, beyond the upload preview's clashes: a generic keyword
    (claimed by more pages than `KB_L0_GENERIC_DOCS` allows, it decides no answer alone) and a keyword that
    lies inside longer keywords of other documents (a query of just it returns those too)."""
    found: list[Finding] = []
    own = {file_path}
    pos = snapshot.position.get(file_path)
    if pos is not None:  # its language versions are one page with it
        own |= {snapshot.entries[p].file_path for p in snapshot.group_members.get(int(snapshot.group_of[pos]), ())}
    kept, _ignored = split_keywords(tuple(keywords))
    for keyword in kept:
        claimants = {snapshot.entries[p].file_path for p in snapshot.claimed_by(keyword)} | own
        pages = _pages(snapshot, claimants)
        if snapshot.is_generic(pages):
            found.append(Finding(WARNING, f"“{keyword}” is a generic keyword: {pages} pages will claim it (more "
                                          f"than {snapshot.generic_limit}), so it decides no answer alone"))
        longer = _inside_longer(snapshot, keyword, own)
        if longer:
            found.append(Finding(WARNING, f"“{keyword}” lies inside longer keywords of {len(longer)} other "
                                          f"document(s): a query of just it returns them too ({_named(longer)})"))
    return tuple(found)


def plan_findings(snapshot: L0View, operation: str, keyword: str, new_keyword: str | None,
                  items: Iterable[PlanItem]) -> tuple[Finding, ...]:
    """What the operation does to L0: a rename that makes a clash, a generic keyword or an overlap, or a weak
    keyword; a removal that leaves documents without keywords, or the keyword claimed by nobody."""
    items = list(items)
    applied = [item.file_path for item in items if item.ready]
    found: list[Finding] = []
    if not items:
        found.append(Finding(INFO, f"no document lists “{keyword}” in its frontmatter"))
    if operation == RENAME and new_keyword:
        reason = weak_keyword_reason(new_keyword)
        if reason is not None:
            found.append(Finding(WARNING, f"“{new_keyword}” is ignored by L0: {reason}"))
        others = [p for p in (snapshot.entries[i].file_path for i in snapshot.claimed_by(new_keyword))
                  if p not in applied]
        claimants = applied + others
        pages = _pages(snapshot, claimants)
        if others:
            found.append(Finding(WARNING, f"“{new_keyword}” is already claimed by {len(others)} other document(s) "
                                          f"({_named(others)})"))
        if pages > 1 and reason is None:
            found.append(Finding(WARNING, f"after the rename {pages} pages claim “{new_keyword}”: a query of just "
                                          "it gets several hits (confidence low)"))
        if snapshot.is_generic(pages) and reason is None:
            found.append(Finding(WARNING, f"“{new_keyword}” becomes a generic keyword ({pages} pages, more than "
                                          f"{snapshot.generic_limit}): it decides no answer alone"))
        longer = _inside_longer(snapshot, new_keyword, set(applied)) if reason is None else []
        if longer:
            found.append(Finding(WARNING, f"“{new_keyword}” lies inside longer keywords of {len(longer)} other "
                                          f"document(s): a query of just it returns them too ({_named(longer)})"))
    if operation == REMOVE:
        emptied = [item.file_path for item in items if item.ready and not split_keywords(item.after)[0]]
        if emptied:
            found.append(Finding(WARNING, f"{len(emptied)} document(s) keep no keyword L0 uses: L0 will not "
                                          f"answer for them ({_named(emptied)})"))
        rest = [p for p in (snapshot.entries[i].file_path for i in snapshot.claimed_by(keyword)) if p not in applied]
        if applied and not rest:
            found.append(Finding(INFO, f"no document will claim “{keyword}” any more: a query of it goes to L1"))
    skipped = [item for item in items if not item.ready]
    if skipped:
        found.append(Finding(INFO, f"{len(skipped)} document(s) are left alone (see each one's reason)"))
    return tuple(found)


def _notes(edit: FrontmatterEdit, kept: set[str]) -> tuple[str, ...]:
    """The upload preview's warnings, without the clashes and weak keywords of keywords the document keeps: those
    were there before the operation and are the keyword map's business."""
    old = tuple(f"L0 will be ambiguous for: {k} —" for k in kept) + tuple(f"keyword “{k}” is ignored" for k in kept)
    return tuple(f.message for f in edit.preview.findings if f.severity == WARNING and not f.message.startswith(old))


def build_plan(snapshot: L0View, operation: str, keyword: str, new_keyword: str | None,
               read_keywords: Callable[[str], tuple[str, ...]],
               prepare: Callable[[str, tuple[str, ...]], FrontmatterEdit], *, made_by: str = "") -> KeywordPlan:
    """The plan for the documents claiming `keyword` now: `read_keywords(file_path)` gives a document's keywords on
    disk, `prepare(file_path, keywords)` makes its edit (from the file on disk). A document that cannot be edited
    (its file is gone, its frontmatter is broken) is an item with the reason, not a failure of the plan."""
    items = []
    for path in documents_claiming(snapshot, keyword):
        try:
            before = read_keywords(path)
            after = new_keywords(before, operation, keyword, new_keyword)
            edit = prepare(path, after)
            if edit.original.keywords != before:  # the file changed between the two reads: once more from it
                before = edit.original.keywords
                after = new_keywords(before, operation, keyword, new_keyword)
                edit = prepare(path, after)
            problem = None if after != before else f"its file no longer lists “{keyword}”"
            items.append(PlanItem(path, before, after, edit, problem, _notes(edit, set(before) & set(after))))
        except KnowledgeBaseError as exc:
            items.append(PlanItem(path, (), (), None, str(exc)))
    findings = plan_findings(snapshot, operation, keyword, new_keyword, items)
    return KeywordPlan(operation, keyword, new_keyword, tuple(items), findings, made_by, datetime.now(UTC))
