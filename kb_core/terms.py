"""How text becomes comparable terms; shared by documents, retrieval and storage (imports nothing of kb_core).

- `normalize_term`: NFKC + casefold + trim, the one normalisation of keywords and queries (L0 matching,
  keyword de-duplication, grouping of tool-call misses).
- `terms` / `coverage` / `STOP_WORDS`: tokenising the way the full-text index does (jieba's segmentation, by
  jieba-rs), for the L1 relevance filter and the "why" panel, with the same stop words the index drops.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

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


# Question words and filler: they say how something is asked, not what it is about, so they do not count
# toward the content terms a relevant chunk must contain. (Not in STOP_WORDS: the Milvus analyzer keeps them.)
FILLER_WORDS = frozenset(
    """
    如何 怎么 怎样 怎么办 什么 什么样 为什么 哪些 哪个 哪里 是否 可以 能否 有关 相关 关于
    遇到 出现 报错 时候 问题 情况 一下
    请问 请 该 应该 需要 进行 使用 通过 介绍 说明 解释 含义 意思 查看 了解 一些 这种 那种 多少 几种
    what what's whats how why where when which who whom whose explain explained describe tell show give get
    about regarding read learn know find use using used need want should would could can may might does do
    did doing done is are was were be been being mean means meaning work works there here please me my our
    your any some more most also just only very much many way ways thing things document documents docs doc
    page pages see look each other others too so then than into onto its it's one ones both either neither
    such same own just still even ever every all
    """.split()
)
# What a question asks of its subject ("configure X", "X 怎么配置"): not what the question is about, so it does
# not dilute a keyword's share of the query (it stays a content term for L1).
_ASKING_WORDS = frozenset("configure config configuring set setup enable disable install use example examples "
                          "配置 设置 开启 关闭 安装 示例".split())


# Chinese filler and stop words, longest first ("为什么" before "什么"); of single characters only the
# particles, since "请" and "个" are also parts of words ("请求", "每个").
_CJK_FILLER = tuple(sorted((w for w in FILLER_WORDS | STOP_WORDS | _ASKING_WORDS if not w.isascii() and len(w) > 1),
                           key=len, reverse=True)) + tuple("的了吗呢吧啊")

# A Latin letter, a digit or the underscore: where one of these sits at the edge of a keyword, the
# neighbouring character must not be one too ("AI" is not in "explain"; "支付" is in "支付网关").
WORD_CHARS = "0-9A-Za-z_\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff"
_WORD_CHAR = re.compile(f"[{WORD_CHARS}]")
# Identifiers: parts joined by _ . - / (keepalive_pool_size, plugin_attr.prometheus.export_addr, KST-5003),
# letters and digits mixed (E73011, http2), camelCase (keyClaimName). Matched on the original spelling.
_IDENTIFIER = re.compile(
    r"(?<![0-9A-Za-z_])(?:"
    r"[0-9A-Za-z]+(?:[_.\-/]+[0-9A-Za-z]+)+"
    r"|[A-Za-z]+[0-9][0-9A-Za-z]*|[0-9]+[A-Za-z][0-9A-Za-z]*"
    r"|[a-z]+[A-Z][0-9A-Za-z]*"
    r"|_*[A-Za-z0-9]+_[_A-Za-z0-9]*"
    r")(?![0-9A-Za-z_])"
)


_LATIN_WORD = re.compile(f"[{WORD_CHARS}]+")


def content_mask(term: str) -> list[bool]:
    """Which characters of a normalised query say what it is about: letters and digits, less the filler, stop
    and asking words ("how do I", "configure", "如何", "的"). A keyword's share of the query counts these."""
    mask = [ch.isalnum() for ch in term]
    for match in _LATIN_WORD.finditer(term):
        if match.group() in FILLER_WORDS or match.group() in STOP_WORDS or match.group() in _ASKING_WORDS:
            mask[match.start():match.end()] = [False] * (match.end() - match.start())
    for word in _CJK_FILLER:
        start = term.find(word)
        while start != -1:
            mask[start:start + len(word)] = [False] * len(word)
            start = term.find(word, start + len(word))
    return mask


MAX_KEYWORDS = 64  # per document in L0; more is a list of everything, not keywords


def weak_keyword_reason(keyword: str) -> str | None:
    """Why a keyword is useless for L0 (it would match nearly every query), or `None` when it is fine.
    `e` would make every query with an "e" in a word... ambiguous; `的` is in every Chinese sentence."""
    term = normalize_term(keyword)
    if len(term) < 2:
        return "shorter than 2 characters"
    if not any(ch.isalpha() for ch in term):
        return "only digits or punctuation"
    if term in STOP_WORDS or term in FILLER_WORDS:
        return "a stop word"
    return None


def is_word_char(ch: str) -> bool:
    return bool(_WORD_CHAR.match(ch))


def aligned(text: str, start: int, stop: int) -> bool:
    """True when `text[start:stop]` is word-aligned: at each edge that is a Latin letter, digit or underscore,
    the character just outside is not one (or there is none)."""
    if start > 0 and is_word_char(text[start]) and is_word_char(text[start - 1]):
        return False
    return not (stop < len(text) and is_word_char(text[stop - 1]) and is_word_char(text[stop]))


def starts_a_word(text: str, start: int) -> bool:
    """True when `text[start]` begins a word: it is no Latin letter, digit or underscore, or the character
    before is none (or there is none). A CJK term starts anywhere: CJK has no spaces."""
    return start == 0 or not (is_word_char(text[start]) and is_word_char(text[start - 1]))


def contains_at_word_start(text: str, part: str) -> bool:
    """`part` occurs in `text` where a word begins (it may end inside one: "rate" in "rates", not in
    "demonstrates")."""
    return _occurs(text, part, lambda start: starts_a_word(text, start))


def contains_aligned(text: str, part: str) -> bool:
    """`part` occurs in `text` at a word-aligned place (both already normalised)."""
    return _occurs(text, part, lambda start: aligned(text, start, start + len(part)))


def _occurs(text: str, part: str, fits: Callable[[int], bool]) -> bool:
    """Whether `part` occurs in `text` at a start `fits` accepts."""
    start = text.find(part)
    while start != -1:
        if fits(start):
            return True
        start = text.find(part, start + 1)
    return False


_ACRONYM = re.compile(r"(?<![0-9A-Za-z_])[A-Z]{2,}[0-9A-Z]*(?![0-9A-Za-z_])")


def identifiers(text: str) -> list[str]:
    """Identifier-like tokens of `text` (and upper-case acronyms such as TPS, XYZ), lower-cased, in order,
    each once."""
    return [token for token, _strict in _identifier_tokens(text)]


def _identifier_tokens(text: str) -> list[tuple[str, bool]]:
    """(token, strict): strict ones (with `_ . /`, digits, camelCase, acronyms) name one specific thing; a
    lower-case hyphenated word (`proxy-rewrite`, but also `per-interface`) is kept whole but is not strict."""
    seen: dict[str, bool] = {}
    for match in _IDENTIFIER.finditer(text):
        raw = match.group(0).strip("._-/")
        token = raw.lower()
        if not token or not (any(c.isalpha() for c in token) or "." in token):
            continue
        strict = any(c in "_./" for c in raw) or any(c.isdigit() for c in raw) or raw != raw.lower()
        seen[token] = seen.get(token, False) or strict
    for match in _ACRONYM.finditer(_IDENTIFIER.sub(" ", text)):
        seen[match.group(0).lower()] = True
    return list(seen.items())


@dataclass(frozen=True)
class QueryTerms:
    """What a query is about, for the L1 relevance check."""

    terms: tuple[str, ...]  # content terms: no stop words, no filler; identifiers whole
    whole: frozenset[str]  # terms that count only where they occur whole and word-aligned
    required: tuple[str, ...]  # strict identifiers: a relevant chunk contains at least one of them


def analyse_query(text: str) -> QueryTerms:
    tokens = _identifier_tokens(text)
    whole = [t for t, _ in tokens]
    terms = list(dict.fromkeys([*whole, *(t for t in terms_of(_ACRONYM.sub(" ", _IDENTIFIER.sub(" ", text)))
                                          if t not in FILLER_WORDS)]))
    return QueryTerms(tuple(terms), frozenset(whole), tuple(t for t, strict in tokens if strict))


_WORD = re.compile(r"[^\W_]", re.UNICODE)
_jieba_lock = threading.Lock()
_jieba = None


def _tokenizer():
    """jieba's segmentation as jieba-rs computes it (rjieba): the full-text index's tokens come from it too
    (`kb_core.storage.fulltext_sqlite.tokenize`), and a Milvus server's jieba analyzer is jieba-rs. Python jieba
    took ~1 s to load its dictionary and was half of ingest; rjieba imports in ~0.25 s."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import rjieba

                _jieba = rjieba
    return _jieba


def warm_up() -> None:
    """The tokenizer's dictionary loads on import (~0.25 s); do it at start-up instead of on the first query."""
    _tokenizer()


def terms(text: str) -> list[str]:
    """Distinct lower-cased content tokens of `text`, in order (stop words and punctuation removed).

    Identifiers stay whole (`key_claim_name`, not key / claim / name): jieba would split them on `_` and `.`.
    """
    return list(dict.fromkeys([*identifiers(text), *terms_of(_ACRONYM.sub(" ", _IDENTIFIER.sub(" ", text)))]))


def terms_of(text: str) -> list[str]:
    """jieba's tokens of `text`, lower-cased, without stop words and punctuation, each once."""
    seen: dict[str, None] = {}
    for token in _tokenizer().cut(text.lower(), True):
        token = token.strip()
        if token and _WORD.search(token) and token not in STOP_WORDS:
            seen.setdefault(token, None)
    return list(seen)


def content_terms(text: str) -> list[str]:
    """`terms` without question words and filler: what a query is about."""
    return list(analyse_query(text).terms)


def coverage(query_terms: Sequence[str], text: str, whole: AbstractSet[str] = frozenset()) -> tuple[float, list[str]]:
    """Share of the query's terms that occur in `text`, and which ones. A term in `whole` (an identifier)
    counts only where it occurs whole and word-aligned ("err_timeout" is not in "err_timeout_4071"); any other
    only where a word begins ("rate" is in "rates", not in "demonstrates")."""
    if not query_terms:
        return 0.0, []
    haystack = text.lower()
    matched = [t for t in query_terms
               if (contains_aligned(haystack, t) if t in whole else any(contains_at_word_start(haystack, f)
                                                                        for f in _forms(t)))]
    return len(matched) / len(query_terms), matched


def _forms(term: str) -> tuple[str, ...]:
    """An English plural also counts as its singular ("connections" in "connection", "policies" in
    "policy"); every other term stands as it is."""
    if len(term) > 4 and term.isascii() and term.isalpha() and term.endswith("s") and not term.endswith("ss"):
        if term.endswith("ies"):
            return term, term[:-3] + "y"
        return term, term[:-1]
    return (term,)


def term_spans(query: str, text: str) -> list[tuple[int, int]]:
    """Where the query's content terms occur in `text`: `(start, stop)` character offsets into `text`, sorted,
    overlapping ones merged. A term is what the L1 relevance check counts (`analyse_query`, `coverage`): an
    identifier only whole and word-aligned, any other term where a word begins (an English plural also as its
    singular: "rate" marks "rates", never the middle of "demonstrates"), case ignored; stop words and filler
    are no terms. So highlighting shows what matched, CJK included ("超时" in "接口超时排查")."""
    if not isinstance(query, str) or not isinstance(text, str) or not query.strip() or not text:
        return []
    analysed = analyse_query(query)
    lowered, origin = _lowered_with_origin(text)
    spans: list[tuple[int, int]] = []
    for term in analysed.terms:
        whole = term in analysed.whole
        for form in (term,) if whole else _forms(term):
            start = lowered.find(form)
            while start != -1:
                stop = start + len(form)
                if aligned(lowered, start, stop) if whole else starts_a_word(lowered, start):
                    spans.append((origin[start], origin[stop - 1] + 1))
                start = lowered.find(form, start + 1)
    merged: list[tuple[int, int]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def _lowered_with_origin(text: str) -> tuple[str, list[int]]:
    """`text.lower()` and, for each of its characters, the offset in `text` it comes from (a few characters
    lower-case to two, such as "İ")."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered, list(range(len(text)))
    parts: list[str] = []
    origin: list[int] = []
    for i, char in enumerate(text):
        low = char.lower()
        parts.append(low)
        origin.extend([i] * len(low))
    return "".join(parts), origin
