"""kb_core: the knowledge-base library behind the console and the agents' `lookup_knowledge` tool.

It never imports streamlit. Heavy dependencies (torch, FlagEmbedding, pymilvus) load lazily.
"""

from kb_core.bootstrap import default_knowledge_base, lookup_knowledge, open_knowledge_base
from kb_core.documents import DeleteOutcome, DocumentError, SyncReport, UploadOutcome
from kb_core.errors import KnowledgeBaseError, SettingsError
from kb_core.frontmatter import Frontmatter, FrontmatterError, has_frontmatter, parse_frontmatter
from kb_core.keyword_index import KnowledgeEntry, KnowledgeIndex, L0Match
from kb_core.knowledge_base import KnowledgeBase, KnowledgeBaseStatus
from kb_core.lookup import HybridLookup, L1Hit, L1Searcher, LookupResult, LookupTrace, Primary, Supplement
from kb_core.settings import Settings, load_settings
from kb_core.tool import TOOL_DESCRIPTION, TOOL_NAME, openai_tool_schema
from kb_core.validation import UploadRejected

__all__ = [
    "DeleteOutcome",
    "DocumentError",
    "KnowledgeBase",
    "KnowledgeBaseStatus",
    "SyncReport",
    "UploadOutcome",
    "UploadRejected",
    "open_knowledge_base",
    "default_knowledge_base",
    "lookup_knowledge",
    "openai_tool_schema",
    "TOOL_NAME",
    "TOOL_DESCRIPTION",
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
    "Supplement",
    "has_frontmatter",
    "load_settings",
    "parse_frontmatter",
]
