"""Summaries of the tool-call log for curators: what agents asked that the knowledge base lacks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from kb_core.stats import percentile
from kb_core.storage.metadata_store import ToolCallRecord
from kb_core.terms import normalize_term

__all__ = ["MissGroup", "is_miss", "misses_by_query", "percentile"]


@dataclass(frozen=True)
class MissGroup:
    """Calls with the same (normalised) query that found nothing, or found it through L1 only."""

    query: str
    calls: int
    not_found: int  # found = false
    l1_only: int  # found, but no exact L0 answer: a keyword could make it exact
    last_seen: datetime
    sources: tuple[str, ...]  # what L1 offered instead


def is_miss(call: ToolCallRecord) -> bool:
    return call.error is None and (not call.found or "exact_L0" not in call.match_types)


def misses_by_query(calls: Sequence[ToolCallRecord]) -> list[MissGroup]:
    groups: dict[str, list[ToolCallRecord]] = {}
    for call in calls:
        if is_miss(call):
            query = str(call.arguments.get("query", ""))
            groups.setdefault(normalize_term(query), []).append(call)
    result = []
    for members in groups.values():
        latest = max(members, key=lambda c: c.created_at)
        sources = tuple(dict.fromkeys(s for c in members for s in c.sources))
        result.append(MissGroup(
            query=str(latest.arguments.get("query", "")),
            calls=len(members),
            not_found=sum(1 for c in members if not c.found),
            l1_only=sum(1 for c in members if c.found),
            last_seen=latest.created_at,
            sources=sources,
        ))
    return sorted(result, key=lambda g: (-g.not_found, -g.calls, g.query))
