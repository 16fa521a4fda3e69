"""Summaries of the tool-call log for curators: what agents asked that the knowledge base lacks, and how the
calls went over time (the aggregation itself runs in SQL: `kb_core.storage.tool_call_log`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from kb_core.ops.stats import percentile
from kb_core.storage.metadata_store import ToolCallRecord
from kb_core.storage.tool_call_log import LOOKUP_TOOL, REPLAY_CALLER, Bucket, CallBucket
from kb_core.terms import normalize_term

__all__ = ["REPLAY_CALLER", "AttentionGroup", "Bucket", "CallBucket", "bucket_for", "confidence_of", "is_miss",
           "needs_attention", "percentile"]

HOURLY_UP_TO = timedelta(days=2)  # a longer span in hours gives too many bars to read


def bucket_for(span: timedelta) -> Bucket:
    """Hours for a day or two, days beyond."""
    return "hour" if span <= HOURLY_UP_TO else "day"


def confidence_of(call: ToolCallRecord) -> str:
    """"high" | "low" | "none" (no primary: L1 only, nothing found or an error)."""
    return call.confidence or "none"


@dataclass(frozen=True)
class AttentionGroup:
    """Calls with the same normalised query (NFKC, casefold, trimmed) that a curator should look at."""

    query: str  # as last asked
    calls: int
    not_found: int  # found = false
    l1_only: int  # found, but no exact L0 answer: a keyword could make it exact
    low_confidence: int  # an L0 answer among several claimants: a keyword is too generic
    last_seen: datetime
    sources: tuple[str, ...]  # what the answers offered


def is_miss(call: ToolCallRecord) -> bool:
    """Needs attention: a lookup answered without error, but not found, L1 only, or with a low-confidence
    primary (a `read_document` call serves the document asked for: never a miss; a lookup the console ran again,
    caller `REPLAY_CALLER`, asks nothing new: never counted)."""
    return call.tool_name == LOOKUP_TOOL and call.error is None and call.caller != REPLAY_CALLER and (
        not call.found or "exact_L0" not in call.match_types or call.confidence == "low")


def needs_attention(calls: Sequence[ToolCallRecord]) -> list[AttentionGroup]:
    """Group the calls that need attention by normalised query; the worst (most not found, then most calls)
    first."""
    groups: dict[str, list[ToolCallRecord]] = {}
    for call in calls:
        if is_miss(call):
            query = str(call.arguments.get("query", ""))
            groups.setdefault(normalize_term(query), []).append(call)
    result = []
    for members in groups.values():
        latest = max(members, key=lambda c: (c.created_at, c.id))
        sources = tuple(dict.fromkeys(s for c in members for s in c.sources))
        l1_only = sum(1 for c in members if c.found and "exact_L0" not in c.match_types)
        result.append(AttentionGroup(
            query=str(latest.arguments.get("query", "")),
            calls=len(members),
            not_found=sum(1 for c in members if not c.found),
            l1_only=l1_only,
            low_confidence=sum(1 for c in members if c.found and "exact_L0" in c.match_types
                               and c.confidence == "low"),
            last_seen=latest.created_at,
            sources=sources,
        ))
    return sorted(result, key=lambda g: (-g.not_found, -g.calls, -g.last_seen.timestamp(), g.query))

