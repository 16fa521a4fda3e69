"""Metadata suggested from a rendition, for the curator to accept: never invented.

- title: the document's own title property when it has a real one, else its first heading, else its first
  short line of text;
- summary: its first real paragraph (no heading, list, table, code, quote or image; enough words to say
  something), cut at a sentence end near `SUMMARY_CHARS`;
- keyword candidates: the identifiers and codes its text names (`ERR_GATEWAY_TIMEOUT`, `proxy-rewrite`,
  `max_body_size`, `KST-5003`, `config.yaml`), found by the rule "did you mean" reads the pages' text with
  (`keywords.suggestions.identifier_tokens`: snake, kebab, dotted, camelCase, letters with digits, upper-case
  codes of four letters or more), less what L0 calls a weak keyword (`terms.weak_keyword_reason`); most
  frequent first, at most `MAX_CANDIDATES`. Link targets and image placeholders are not text.
"""

from __future__ import annotations

import re
from collections import Counter

from kb_core.keywords.suggestions import MAX_LENGTH, MIN_LENGTH, identifier_tokens
from kb_core.terms import weak_keyword_reason

MAX_CANDIDATES = 20
SUMMARY_CHARS = 300
MIN_SUMMARY_WORDS = 6
MIN_SUMMARY_CJK = 12
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1\s*$", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.MULTILINE)
_NOT_PROSE = re.compile(r"^(?:#{1,6}\s|[-+*]\s|\d{1,9}[.)]\s|>|\||`{3,}|~{3,}|!\[)")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


# headings that name a part of any document, not this one
_GENERIC_HEADING = re.compile(r"^(?:(?:table of )?contents|slide \d+|目录|目錄)$", re.IGNORECASE)


def first_heading(markdown: str) -> str:
    for found in _HEADING.finditer(_FENCE.sub("", markdown)):
        text = found.group(1).strip()
        if not _GENERIC_HEADING.match(text):
            return text
    return ""


def title_suggestion(markdown: str, property_title: str) -> str:
    if property_title.strip():
        return property_title.strip()
    heading = first_heading(markdown)
    if heading:
        return _LINK.sub(r"\1", heading)
    for line in _FENCE.sub("", markdown).splitlines():
        line = line.strip()
        if line and not _NOT_PROSE.match(line):
            return line if len(line) <= 100 else ""
    return ""


def _prose(block: str) -> bool:
    text = block.strip()
    if not text or _NOT_PROSE.match(text):
        return False
    return len(text.split()) >= MIN_SUMMARY_WORDS or len(_CJK.findall(text)) >= MIN_SUMMARY_CJK


def summary_suggestion(markdown: str) -> str:
    for block in _FENCE.sub("", markdown).split("\n\n"):
        if _prose(block):
            text = " ".join(_LINK.sub(r"\1", block).split()).lstrip("\\")
            if len(text) <= SUMMARY_CHARS:
                return text
            cut = ""
            for sentence in _SENTENCE_END.split(text):
                if cut and len(cut) + len(sentence) > SUMMARY_CHARS:
                    break
                cut = f"{cut} {sentence}".strip() if cut and not _CJK.match(cut[-1]) else cut + sentence
            return cut if len(cut) <= SUMMARY_CHARS else text[:SUMMARY_CHARS].rsplit(" ", 1)[0] + " …"
    return ""


def keyword_candidates(markdown: str) -> tuple[str, ...]:
    text = _LINK.sub(r"\1", _IMAGE.sub(" ", markdown))
    counts: Counter[str] = Counter()
    spelled: dict[str, str] = {}
    strict: dict[str, bool] = {}
    for line in text.splitlines():
        for token in identifier_tokens(line):
            if MIN_LENGTH <= len(token) <= MAX_LENGTH and weak_keyword_reason(token) is None:
                key = token.casefold()
                spelled.setdefault(key, token)
                counts[key] += 1
                # as `terms` tells them apart: `_ . /`, digits or capitals name one thing; a lower-case hyphenated
                # word (`proxy-rewrite`, but also `well-known`) may be plain English, so it ranks after them
                strict[key] = strict.get(key, False) or token != token.lower() or any(
                    c in "_./" or c.isdigit() for c in token)
    order = {key: i for i, key in enumerate(spelled)}
    ranked = sorted(counts, key=lambda key: (not strict[key], -counts[key], order[key]))
    return tuple(spelled[key] for key in ranked[:MAX_CANDIDATES])
