"""`kb.trash`: the deleted documents waiting in the trash, restored or purged by a curator. A reader limited
to some audiences sees only the items whose page it could read (the page's own frontmatter `audience`, else its
folder's default), and an item it may not see is not in the trash for it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from kb_core.access import Role
from kb_core.documents.language import document_language
from kb_core.documents.trash import TrashItem, purge_age_days
from kb_core.errors import InvalidInputError, KnowledgeBaseError
from kb_core.jobs.work import purge_trash_work
from kb_core.keywords.entry import entry_of_bytes

if TYPE_CHECKING:
    from kb_core.documents.service import UploadOutcome
    from kb_core.jobs.runner import Work
    from kb_core.progress import Progress
    from kb_core.services.acting import Acting
    from kb_core.services.parts import Parts


class TrashBin:
    def __init__(self, parts: Parts, acting: Acting, *, trash_days: float):
        self._parts = parts
        self._trash = parts.trash
        self._acting = acting
        self._trash_days = trash_days

    def items(self) -> list[TrashItem]:
        """The deleted documents waiting in the trash, newest first (a broken one says so: `problem`)."""
        items = self._trash.items()
        return items if not self._acting.limited else [item for item in items if self._may_see(item)]

    def _may_see(self, item: TrashItem) -> bool:
        """Whether the actor could read the page the item holds: its audience is in its own bytes."""
        scope = self._acting.scope
        try:
            entry = entry_of_bytes(self._parts.folder, item.relative_path, self._trash.read(item))
        except KnowledgeBaseError:
            entry = None  # unreadable: judged by its folder alone, as a page without frontmatter
        if entry is not None:
            return scope.admits_entry(entry)
        return scope.admits(item.category, document_language(item.relative_path, None, ""), ())

    def _current(self, item: TrashItem | str) -> TrashItem:
        found = self._trash.current(item)
        if self._acting.limited and not self._may_see(found):
            raise InvalidInputError(f"{found.item_id!r} is not in the trash: no item has that id or document path "
                                    "(restored or purged already?); nothing was done")
        return found

    def restore(self, item: TrashItem | str, *, replace: bool = False,
                progress: Progress | None = None) -> UploadOutcome:
        """Bring a document back byte for byte through the upload (`item`: a `TrashItem`, its id, or a document
        path: its newest item); a file at that path again raises `RestoreConflictError` unless `replace`.
        Curators only."""
        with self._acting.writing(Role.CURATOR, "restore documents", "restore"):
            return self._parts.documents.restore(self._current(item), replace=replace, **_p(progress))

    def purge(self, older_than_days: float | None = None, *, items: Iterable[TrashItem | str] | None = None,
              progress: Progress | None = None) -> list[TrashItem]:
        """Remove for good what was deleted `older_than_days` ago (default `KB_TRASH_DAYS`), or exactly `items`
        (items or ids, any age). The items removed. Curators only."""
        with self._acting.writing(Role.CURATOR, "purge the trash", "purge"):
            days = purge_age_days(older_than_days, self._trash_days)
            chosen = None if items is None else [self._current(item) for item in items]
            if chosen is None and self._acting.limited:
                # by age, a limited curator purges only what it sees
                cutoff = timedelta(days=days)
                chosen = [item for item in self.items() if datetime.now(UTC) - item.deleted_at >= cutoff]
            return self._trash.purge(timedelta(days=days), items=chosen, **_p(progress))

    def purge_job(self, older_than_days: float | None) -> tuple[dict[str, Any], Work]:
        """The purge as a job's parameters and work (the job registry's `purge_trash` kind)."""
        self._acting.require(Role.CURATOR, "purge the trash")
        days = purge_age_days(older_than_days, self._trash_days)
        return {"older_than_days": days}, purge_trash_work(
            lambda progress: self.purge(older_than_days=days, progress=progress), days)


def _p(progress: Progress | None) -> dict:
    return {} if progress is None else {"progress": progress}
