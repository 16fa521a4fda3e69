"""The tools' answers as pydantic models: the MCP server publishes them as each tool's `outputSchema`, and
Python agents can validate an answer with them (`LookupResponse.model_validate(answer)`).

The payload (`LookupResult.to_dict()`, `ReadResult.to_dict()`) is the source of truth; these models only
describe it. Optional keys are present only when there is something to say (`note`, `translations`,
`alternatives`, ...), so every one of them has a default; and every model allows keys it does not declare, so
an answer that grows a field still validates.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Alternative", "LookupResponse", "PrimaryAnswer", "ReadDocumentResponse", "Suggestion",
           "SupplementAnswer", "Translation"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Translation(_Open):
    """Another language version of the primary's page."""

    source: str = Field(description="The version's source (pass it to read_document to read it).")
    lang: str = Field(description="Its language, e.g. 'en', 'zh'.")


class PrimaryAnswer(_Open):
    """A whole document: the L0 match of a lookup, or the document read_document served."""

    content: str = Field(description="The cleaned document cut at 2,000 characters ('...' when cut), or the "
                                     "section asked for with section_title.")
    source: str = Field(description="The document's source (its path as the knowledge base names it).")
    matchType: str = Field(description="'exact_L0' (lookup_knowledge: the query matched its keywords) or 'read' "
                                       "(read_document).")
    confidence: str = Field(description="'high': the only match, or read_document; 'low': several documents "
                                        "matched and this one ranked first.")
    availableSections: list[str] | None = Field(
        description="The document's sections (heading paths, or the curator's names), in document order; null "
                    "when it has no headings. Pass one as section_title to read it.")
    section: str | None = Field(description="The heading path served instead of the document's head; null: the "
                                            "head is served.")
    translations: list[Translation] | None = Field(
        default=None, description="The page's other language versions; only present for a page that has some.")


class SupplementAnswer(_Open):
    """L1's best passage (semantic and full-text search over chunks)."""

    content: str = Field(description="The passage (one chunk, not the whole document).")
    source: str = Field(description="Its document's source: read_document reads the document.")
    matchType: str = Field(description="'semantic_L1'.")
    retrievers: list[str] | None = Field(default=None, description="Which retrievers found it ('dense', 'bm25').")


class Alternative(_Open):
    """Another document the query could mean."""

    source: str = Field(description="Its source: read_document reads it.")
    title: str | None = Field(default=None, description="Its title.")
    lang: str | None = Field(default=None, description="Its language.")
    why: str | None = Field(default=None, description="Why it is offered.")


class Suggestion(_Open):
    """A keyword that would answer exactly."""

    keyword: str = Field(description="The keyword to look up instead.")
    source: str | None = Field(default=None, description="The document it leads to.")
    title: str | None = Field(default=None, description="That document's title.")


class LookupResponse(_Open):
    """What lookup_knowledge returns."""

    found: bool = Field(description="True when primary or supplement is present.")
    primary: PrimaryAnswer | None = Field(description="The whole document whose keywords the query matched.")
    supplement: SupplementAnswer | None = Field(description="L1's best passage, when L1 ran and found one.")
    alternatives: list[Alternative] | None = Field(default=None, description="Other documents the query could "
                                                                             "mean; only present when there are.")
    suggestions: list[Suggestion] | None = Field(default=None, description="Keywords that would answer exactly; "
                                                                           "only present when there are.")
    note: str | None = Field(default=None, description="Why section_title was not served (no such section, or "
                                                       "several); only present when there is something to say.")
    error: str | None = Field(default=None, description="Present only on an error result.")


class ReadDocumentResponse(LookupResponse):
    """What read_document returns: the lookup's shape with the document as the primary (matchType 'read')."""
