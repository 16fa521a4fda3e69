"""The facade's jobs beyond reconcile, re-index all and uploads (a mixin of `KnowledgeBase`): a keyword plan
applied as one job (the keyword map's bulk rename or removal), and the trash purge as a job (at every opening
that finds something to purge, and from the Trash tab). Each job's parameters are plain values (a plan's items as
dicts), stored with the job; the work itself is a callable the jobs runner runs. The registry of job kinds
(`kb_core.jobs.kinds`) asks for these two kinds' preparations (`_keyword_plan_job`, `_purge_trash_job`): they
need the keyword plan and the trash, which kb_core.jobs does not import."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb_core.access import Role
from kb_core.documents.trash import purge_age_days
from kb_core.errors import DocumentConflictError, InvalidInputError, KnowledgeBaseError
from kb_core.jobs.runner import Work
from kb_core.jobs.work import keyword_plan_work, purge_trash_work
from kb_core.progress import Progress
from kb_core.retrieval.keyword_plan import KeywordPlan, KeywordPlanReport, PlanItem, PlanOutcome

if TYPE_CHECKING:
    from kb_core.access import Actor
    from kb_core.documents.trash import TrashItem
    from kb_core.settings import Settings


class JobsFacade:
    """Mixed into `KnowledgeBase`; uses its actor, settings and writes."""

    _actor: Actor
    _settings: Settings
    save_frontmatter_edit: Callable[..., Any]
    purge_trash: Callable[..., list[TrashItem]]

    # -- a keyword plan ------------------------------------------------------------------------------------------
    def apply_keyword_plan(self, plan: KeywordPlan, *, progress: Progress | None = None) -> KeywordPlanReport:
        """Apply a plan document by document through the in-place edit (`save_frontmatter_edit`), in the calling
        thread: each document is saved, or skipped with the reason (not ready in the plan, or its file changed
        since the plan was made: someone edited it meanwhile), or failed (the save raised; nothing of it was
        written); the others go on. `progress("editing", done, total)` after each document, then
        `("done", total, total)`. Curators only. The console runs a plan as a job instead:
        `start_job("keyword_plan", plan=plan)` (same outcomes, with progress and cancel in the jobs panel)."""
        self._check_plan(plan)
        report = progress or (lambda stage, done, total: None)
        outcomes = []
        total = len(plan.items)
        for done, item in enumerate(plan.items):
            report("editing", done, total)
            outcomes.append(PlanOutcome(item.file_path, *self._apply_plan_item(item)))
        report("done", total, total)
        return KeywordPlanReport(plan, tuple(outcomes))

    def _check_plan(self, plan: object) -> None:
        if not isinstance(plan, KeywordPlan):
            raise InvalidInputError(f"expected a KeywordPlan, got {type(plan).__name__}")
        self._actor.require(Role.CURATOR, "edit documents")

    def _apply_plan_item(self, item: PlanItem) -> tuple[str, str]:
        """(outcome, detail) of one document of a plan: saved, skipped or failed."""
        if not item.ready:
            return "skipped", item.reason
        try:
            outcome = self.save_frontmatter_edit(item.edit)
        except DocumentConflictError as exc:
            return "skipped", str(exc)
        except KnowledgeBaseError as exc:
            return "failed", str(exc)
        return "saved", f"{outcome.action}: keywords {', '.join(item.after) or '(none)'}"

    def _keyword_plan_job(self, plan: KeywordPlan | None) -> tuple[dict[str, Any], Work, int]:
        """The job's parameters (the plan's items, as plain values), its work and its total."""
        if plan is None:
            raise InvalidInputError("a keyword plan job needs the plan (prepare_keyword_rename / _removal)")
        self._check_plan(plan)
        params = {"operation": plan.operation, "keyword": plan.keyword, "new_keyword": plan.new_keyword,
                  "plan": plan.describe(), "made_by": plan.made_by,
                  "made_at": plan.made_at.isoformat() if plan.made_at else None,
                  "items": [{"file_path": item.file_path, "before": list(item.before), "after": list(item.after),
                             "ready": item.ready, "reason": item.reason,
                             "base_sha256": item.edit.base_sha256 if item.edit is not None else None}
                            for item in plan.items]}
        what = plan.describe().rpartition(" in ")[0]
        return params, keyword_plan_work(plan.items, self._apply_plan_item, plan.describe(), what), len(plan.items)

    # -- the trash purge -----------------------------------------------------------------------------------------
    def _purge_trash_job(self, older_than_days: float | None) -> tuple[dict[str, Any], Work]:
        self._actor.require(Role.CURATOR, "purge the trash")
        days = purge_age_days(older_than_days, self._settings.trash_days)
        return {"older_than_days": days}, purge_trash_work(
            lambda progress: self.purge_trash(older_than_days=days, progress=progress), days)
