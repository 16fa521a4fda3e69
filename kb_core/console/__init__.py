"""The console's helpers: what `pages/` and `app.py` use beyond `kb_core`'s face (role maps and sign-in,
bench links, job and upload values, section and synonym text, evaluation comparisons, the errors the pages
tell apart). Loaded on first use of each name, like `kb_core` itself; never imports streamlit."""

from __future__ import annotations

from typing import Any

from kb_core import lazy_attribute

_EXPORTS: dict[str, str] = {
    "RoleMap": "kb_core.access",
    "SignedIn": "kb_core.access",
    "audiences_of": "kb_core.access",
    "service_actor": "kb_core.access",
    "REPLAY_CALLER": "kb_core.agent.call_stats",
    "confidence_of": "kb_core.agent.call_stats",
    "READ_TOOL_DESCRIPTION": "kb_core.agent.tool",
    "openai_read_tool_schema": "kb_core.agent.tool",
    "BatchAction": "kb_core.documents.batch",
    "BatchFile": "kb_core.documents.batch",
    "clean_document": "kb_core.documents.cleaning",
    "FrontmatterEdit": "kb_core.documents.document_edit",
    "categories_below": "kb_core.documents.path_rule",
    "category_folders": "kb_core.documents.path_rule",
    "split_body": "kb_core.documents.frontmatter",
    "FrontmatterFields": "kb_core.documents.frontmatter_edit",
    "parse_section_lines": "kb_core.documents.frontmatter_edit",
    "section_lines": "kb_core.documents.frontmatter_edit",
    "SectionChips": "kb_core.documents.sections",
    "section_chips": "kb_core.documents.sections",
    "TrashItem": "kb_core.documents.trash",
    "AccessDeniedError": "kb_core.errors",
    "DocumentConflictError": "kb_core.errors",
    "EditConflictError": "kb_core.errors",
    "JobCancelledError": "kb_core.errors",
    "RestoreConflictError": "kb_core.errors",
    "HEADLINE": "kb_core.evaluation.runs",
    "counted_warnings_on_stderr": "kb_core.ops.logs",
    "ChangedQuery": "kb_core.evaluation.runs",
    "RunComparison": "kb_core.evaluation.runs",
    "compare_runs": "kb_core.evaluation.runs",
    "JobFile": "kb_core.jobs.model",
    "JobKind": "kb_core.jobs.model",
    "UploadRow": "kb_core.jobs.model",
    "describe_seconds": "kb_core.jobs.model",
    "DocumentSuggestion": "kb_core.retrieval.attention",
    "MAX_TOP_K": "kb_core.retrieval.trial",
    "MIN_TOP_K": "kb_core.retrieval.trial",
    "TrialOptions": "kb_core.retrieval.trial",
    "TrialRow": "kb_core.retrieval.trial",
    "TrialRun": "kb_core.retrieval.trial",
    "HistoryEntry": "kb_core.retrieval.trial",
    "Retriever": "kb_core.retrieval.trial",
    "trial_link_params": "kb_core.retrieval.trial",
    "parse_trial_link": "kb_core.retrieval.trial",
    "KeywordPlan": "kb_core.services.keyword_plan",
    "KeywordPlanReport": "kb_core.services.keyword_plan",
    "PlanItem": "kb_core.services.keyword_plan",
    "PlanOutcome": "kb_core.services.keyword_plan",
    "percentile": "kb_core.ops.stats",
}
# public names that are another name in their module
_RENAMED: dict[str, tuple[str, str]] = {
    "MORE_SECTIONS": ("kb_core.documents.sections", "MORE"),
    "synonym_lines": ("kb_core.documents.synonyms", "as_lines"),
    "parse_synonym_lines": ("kb_core.documents.synonyms", "parse_lines"),
}

__all__ = sorted([*_EXPORTS, *_RENAMED])


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _EXPORTS, _RENAMED, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
