"""How text becomes comparable terms; shared by documents, retrieval and storage (imports nothing of kb_core).

- `normalize_term`: NFKC + casefold + trim, the one normalisation of keywords and queries (L0 matching,
  keyword de-duplication, grouping of tool-call misses).
- `terms` / `coverage` / `STOP_WORDS`: tokenising the way Milvus' jieba analyzer does, for the L1
  relevance filter and the "why" panel. Milvus Lite cannot report how it analysed a query (`run_analyzer`
  is unimplemented), so the filter re-tokenises with jieba itself, with the same stop words the
  collection's analyzer drops.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata

log = logging.getLogger(__name__)

# Function words that carry no topic: a query made only of these must not "find" a document.
STOP_WORDS = frozenset(
    """
    的 了 是 在 和 与 或 及 等 也 就 都 而 着 吗 呢 吧 啊 之 其 这 那 这个 那个 有 个 一个 我 你 他 她 它 我们 你们
    他们 如何 怎么 怎样 什么 为什么 哪些 哪个 是否 可以 能 会 要 把 被 对 从 到 为 以 于 中 上 下 不 没 没有 吗 请问
    a an the of to in on for and or is are was were be been how what why when which who do does did with by
    at from this that these those it its as can could should would i you we they he she my your our me
    """.split()
)



def normalize_term(text: str) -> str:
    """NFKC, casefold, trim: "ＥＲＲ＿ＴＩＭＥＯＵＴ " and "err_timeout" normalise alike.

    NUL is dropped because the L0 index uses it as a separator between keywords.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return folded.replace("\x00", "").strip()


_WORD = re.compile(r"[^\W_]", re.UNICODE)
_jieba_lock = threading.Lock()
_jieba = None


def _tokenizer():
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def warm_up() -> None:
    """jieba loads its dictionary lazily (~0.6 s); do it at start-up instead of on the first query."""
    _tokenizer()


def terms(text: str) -> list[str]:
    """Distinct lower-cased content tokens of `text`, in order (stop words and punctuation removed)."""
    seen: dict[str, None] = {}
    for token in _tokenizer().cut(text.lower()):
        token = token.strip()
        if token and _WORD.search(token) and token not in STOP_WORDS:
            seen.setdefault(token, None)
    return list(seen)


def coverage(query_terms: list[str], text: str) -> tuple[float, list[str]]:
    """Share of the query's terms that occur in `text`, and which ones."""
    if not query_terms:
        return 0.0, []
    haystack = text.lower()
    matched = [t for t in query_terms if t in haystack]
    return len(matched) / len(query_terms), matched
