"""kb_core: the knowledge-base library behind the console and the agents' tools (`lookup_knowledge`,
`read_document`).

It never imports streamlit. Heavy dependencies (torch, FlagEmbedding, pymilvus) load lazily.

Layout (each sub-package's docstring says what it owns and what it may import):

- `kb_core.documents`: what a document is and how it gets in (frontmatter, validation, chunking, lint,
  the document service that writes to every store);
- `kb_core.retrieval`: answering a query (L0 keyword index, L1 searcher, the hybrid lookup and its result);
- `kb_core.storage`: the adapters and their ports (SQL metadata + migrations, Milvus, embedding models);
- `kb_core.jobs`: long work (reconcile, re-index all, uploads) as jobs of the knowledge base's process;
- `kb_core.agent`: the agents' tools, `lookup_knowledge` and `read_document` (schemas, response model, call log
  and its statistics, MCP server);
- top level: this public API, `settings`, `errors`, `terms` (text normalisation), `progress`, `stats`,
  `knowledge_base` (the `KnowledgeBase` facade) and `bootstrap` (the composition root);
  the `kb` command (`cli`); `kb_core.testing` holds offline test helpers.
"""

from kb_core.access import Actor, Role, RoleMap, SignedIn, service_actor
from kb_core.agent.call_stats import REPLAY_CALLER, confidence_of
from kb_core.agent.tool import (
    READ_TOOL_DESCRIPTION,
    READ_TOOL_NAME,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    openai_read_tool_schema,
    openai_tool_schema,
    openai_tool_schemas,
)
from kb_core.bootstrap import default_knowledge_base, lookup_knowledge, open_knowledge_base, read_document
from kb_core.documents.batch import BatchAction, BatchFile
from kb_core.documents.cleaning import clean_document
from kb_core.documents.document_edit import FrontmatterEdit
from kb_core.documents.entry import KnowledgeEntry
from kb_core.documents.folder import categories_below, category_folders
from kb_core.documents.frontmatter import Frontmatter, has_frontmatter, parse_frontmatter, split_body
from kb_core.documents.frontmatter_edit import FrontmatterFields, parse_section_lines, section_lines
from kb_core.documents.reconcile import ReconcileReport
from kb_core.documents.sections import MORE as MORE_SECTIONS
from kb_core.documents.sections import SectionChips, section_chips
from kb_core.documents.service import DeleteOutcome, UploadOutcome
from kb_core.documents.synonyms import as_lines as synonym_lines
from kb_core.documents.synonyms import parse_lines as parse_synonym_lines
from kb_core.documents.trash import TrashItem
from kb_core.errors import (
    AccessDeniedError,
    DocumentConflictError,
    DocumentError,
    EditConflictError,
    FrontmatterError,
    InvalidInputError,
    JobCancelledError,
    KnowledgeBaseError,
    RestoreConflictError,
    SettingsError,
    UploadRejected,
)
from kb_core.facade_evaluation import HEADLINE, ChangedQuery, RunComparison, compare_runs
from kb_core.jobs.model import JobFile, JobKind, JobRecord, JobState, describe_seconds
from kb_core.knowledge_base import KnowledgeBase, KnowledgeBaseStatus
from kb_core.retrieval.attention import DocumentSuggestion
from kb_core.retrieval.bench import (
    MAX_TOP_K,
    MIN_TOP_K,
    BenchOptions,
    BenchRow,
    BenchRun,
    HistoryEntry,
    Retriever,
    bench_link_params,
    parse_bench_link,
)
from kb_core.retrieval.keyword_index import KnowledgeIndex, L0Match
from kb_core.retrieval.keyword_plan import KeywordPlan, KeywordPlanReport, PlanItem, PlanOutcome
from kb_core.retrieval.lookup import HybridLookup, L1Hit, L1Searcher, LookupResult, LookupTrace, Primary, Supplement
from kb_core.settings import Settings, load_settings
from kb_core.stats import percentile

SyncReport = ReconcileReport  # the report of `reconcile` (named for the sync it replaced)

__all__ = [
    "BenchOptions",
    "BenchRow",
    "BenchRun",
    "HistoryEntry",
    "MAX_TOP_K",
    "MIN_TOP_K",
    "REPLAY_CALLER",
    "Retriever",
    "bench_link_params",
    "parse_bench_link",
    "InvalidInputError",
    "JobCancelledError",
    "JobFile",
    "JobKind",
    "JobRecord",
    "JobState",
    "HEADLINE",
    "ChangedQuery",
    "RunComparison",
    "compare_runs",
    "describe_seconds",
    "parse_synonym_lines",
    "synonym_lines",
    "DocumentSuggestion",
    "EditConflictError",
    "FrontmatterEdit",
    "FrontmatterFields",
    "KeywordPlan",
    "KeywordPlanReport",
    "PlanItem",
    "PlanOutcome",
    "parse_section_lines",
    "section_lines",
    "AccessDeniedError",
    "Actor",
    "Role",
    "RoleMap",
    "SignedIn",
    "service_actor",
    "BatchAction",
    "BatchFile",
    "DocumentConflictError",
    "RestoreConflictError",
    "TrashItem",
    "MORE_SECTIONS",
    "categories_below",
    "category_folders",
    "clean_document",
    "confidence_of",
    "percentile",
    "section_chips",
    "split_body",
    "DeleteOutcome",
    "DocumentError",
    "KnowledgeBase",
    "KnowledgeBaseStatus",
    "ReconcileReport",
    "SyncReport",
    "UploadOutcome",
    "UploadRejected",
    "open_knowledge_base",
    "default_knowledge_base",
    "lookup_knowledge",
    "openai_tool_schema",
    "openai_tool_schemas",
    "openai_read_tool_schema",
    "read_document",
    "TOOL_NAME",
    "TOOL_DESCRIPTION",
    "READ_TOOL_NAME",
    "READ_TOOL_DESCRIPTION",
    "Frontmatter",
    "FrontmatterError",
    "HybridLookup",
    "KnowledgeBaseError",
    "KnowledgeEntry",
    "KnowledgeIndex",
    "L0Match",
    "L1Hit",
    "L1Searcher",
    "LookupResult",
    "LookupTrace",
    "Primary",
    "Settings",
    "SettingsError",
    "SectionChips",
    "Supplement",
    "has_frontmatter",
    "load_settings",
    "parse_frontmatter",
]
