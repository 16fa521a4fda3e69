"""Did you mean: keywords a few typing slips away from an identifier in a query that L0 did not find.

When a query such as "ERR_TIMOUT 是什么意思" or "mcp-brdige" hits no keyword, the answer can still name the
document the asker most likely meant: `Snapshot.suggester().suggest(query)` returns at most three
`Suggestion(keyword, source, title)`. It never changes what was found; it is a hint.

What takes part
- Query side: identifier-shaped tokens only: parts joined by `_ - .` (`ERR_TIMOUT`, `mcp-brdige`,
  `config.yml`), letters mixed with digits (`E40371`, `http2`), camelCase (`dataID`), upper-case codes of 4+
  letters (`ENOENT`). Plain words ("timeout", "Kestrel") and CJK never get a fuzzy search: a misspelt word
  is L1's business, and every English word is one letter from another. One exception costs a dict lookup: a
  plain word that is an identifier keyword written without its separators (`mcpbridge`, `keyauth`).
- Vocabulary side: the keywords whose whole spelling is one identifier-shaped token (`KST-5003`,
  `proxy-rewrite`, `X-Request-Id`), de-duplicated as L0's normalised terms; the first spelling is shown.

The distance rule
- Optimal string alignment (Damerau-Levenshtein without repeated edits of one substring; rapidfuzz
  `distance.OSA`): a dropped, doubled, swapped or wrong character costs 1 each. Compared case-folded (NFKC +
  casefold, as L0) with `-`, `_` and `.` treated as one separator, so `mcp_bridge` for `mcp-bridge` costs 0
  (a suggestion, not an L0 hit) and `KST5003` for `KST-5003` costs 1.
- At most 2 edits for tokens of 8 characters or more, 1 for 4 to 7, none for 3 or fewer (too many
  neighbours: `TLS`, `ACL`, `SNI`). Keywords shorter than 4 characters are never suggested.
- Numbers name things: `E40318` is another code than `E40317`, not a slip. A candidate is refused when its
  digits differ from the token's (a wrong, dropped or doubled digit), except for one swap of two adjacent
  digits (`E40371` for `E40317`), and when a run of letters appears or disappears next to the number
  (`E40317X`). Letters around the number may be mistyped within the limit (`KTS-5003`).
- An exact match (same normalised term) is no suggestion: L0 would have hit it.

Ranking and claimants: fewest edits first, then the rarer keyword (claimed by fewer documents, a page's
translations counting once), then the one closest in length, then index order. One suggestion per keyword,
naming its first claimant (in the asker's language when `lang` is given and a translation has it), and one per
translation group: two keywords of one page name it once.

Cost: a search looks only at the keywords with the same digits (sorted: a swap keeps them) and a length within
reach (the vocabulary is sorted by digits, then length), drops in numpy those whose character classes differ
too much (an edit changes at most two "has a c" / "has two c" bits, a swap none), and measures the few that
remain with rapidfuzz. At most `MAX_TOKENS` identifiers of a query are searched. The suggester is built once
per snapshot, on first use (`Snapshot.suggester()`); once one was, `KnowledgeIndex` builds the next snapshot's
in the writer, before the swap. What it learns of each keyword is kept across snapshots, so the rebuild after
an upload analyses only the new keywords. `benchmarks/bench_suggest.py` measures both at 10,000 documents.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import OSA

from kb_core.terms import normalize_term

if TYPE_CHECKING:
    from kb_core.keywords.entry import KnowledgeEntry

MAX_SUGGESTIONS = 3
MAX_TOKENS = 8  # identifier tokens of one query that get a fuzzy search (a pasted log line has dozens)
MIN_LENGTH = 4  # shorter tokens and keywords take no part
MAX_LENGTH = 128  # nor do longer ones (a pasted blob is no identifier)
MAX_SCANNED = 256  # tokens of one query looked at (identifiers or not): a 100,000-character query costs no more

# A run of ASCII letters and digits, possibly joined by - _ . (a trailing "." or "-" is not part of it).
_TOKEN = re.compile(r"(?<![0-9A-Za-z_])[0-9A-Za-z]+(?:[-_.]+[0-9A-Za-z]+)*(?![0-9A-Za-z_])")
_SEPARATORS = re.compile(r"[-_.]+")
_JOINED_OR_CAMEL = re.compile(r"[-_.]|[a-z][A-Z]")
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")
_RUNS = re.compile(r"[0-9]+|[a-z]+")
_NON_DIGITS = re.compile(r"[^0-9]+")


class Vocabulary(Protocol):
    """What a suggester reads of `matching.Snapshot` (which imports this module, not the reverse)."""

    entries: Sequence[KnowledgeEntry]
    terms: Sequence[str]
    term_id: Mapping[str, int]
    postings: Sequence[np.ndarray]
    df: Sequence[int]
    group_of: np.ndarray


@dataclass(frozen=True)
class Suggestion:
    """A keyword the query probably meant, and the document that claims it."""

    keyword: str  # as the document spells it
    source: str  # the document's file_path
    title: str


def max_distance(length: int) -> int:
    """Edits allowed for a token of `length` characters: 2 from 8 characters, 1 from 4, none below."""
    return 2 if length >= 8 else 1 if length >= MIN_LENGTH else 0


def identifier_shaped(token: str) -> bool:
    """True for a token (original spelling, one `_TOKEN` match) that names a thing rather than being a word:
    joined parts (snake, kebab, dotted), letters with digits, camelCase, or an upper-case code of 4+ letters."""
    if _JOINED_OR_CAMEL.search(token):
        return True
    if _DIGIT.search(token):
        return bool(_LETTER.search(token))
    return len(token) >= MIN_LENGTH and token.isalpha() and token.isupper()


def identifier_tokens(query: str) -> list[str]:
    """The identifier-shaped tokens of `query` (NFKC, original case), in order, each once."""
    text = unicodedata.normalize("NFKC", query) if isinstance(query, str) else ""
    return list(dict.fromkeys(t for t in _TOKEN.findall(text) if identifier_shaped(t)))


def fold(term: str) -> str:
    """A normalised term with every run of `- _ .` as one `_`: the form distances are measured on."""
    return _SEPARATORS.sub("_", term)


def _numbers_agree(token: str, keyword: str) -> bool:
    """The digits of two folded strings agree (one swap of adjacent digits allowed) and letters sit in the
    same places around them: `e40371`~`e40317`, `kst5003`~`kst_5003`; not `e40318`, `e40317x`."""
    a, b = _RUNS.findall(token.replace("_", "")), _RUNS.findall(keyword.replace("_", ""))
    if len(a) != len(b):
        return False
    swapped = False
    for x, y in zip(a, b, strict=True):
        if x[0].isdigit() != y[0].isdigit():
            return False
        if x == y or not x[0].isdigit():
            continue
        if swapped or len(x) != len(y):
            return False
        diff = [i for i in range(len(x)) if x[i] != y[i]]
        if len(diff) != 2 or diff[1] != diff[0] + 1 or x[diff[0]] != y[diff[1]] or x[diff[1]] != y[diff[0]]:
            return False
        swapped = True
    return True


def _digits(folded: str) -> str:
    """The digits of a string, sorted: keywords within reach have the same (a swap of two keeps them)."""
    digits = _NON_DIGITS.sub("", folded)
    return "".join(sorted(digits)) if len(digits) > 1 else digits


def _analyse(keyword: str) -> tuple[str, str, str] | bool:
    """(normalised term, folded form, sorted digits) of an identifier-shaped keyword; False for the others."""
    text = unicodedata.normalize("NFKC", keyword).strip()
    if not MIN_LENGTH <= len(text) <= MAX_LENGTH or not _TOKEN.fullmatch(text) or not identifier_shaped(text):
        return False
    term = normalize_term(keyword)
    folded = fold(term)
    return term, folded, _digits(folded)


# keyword -> _analyse(keyword), shared by every snapshot's suggester: a rebuild after one upload analyses the
# new keywords only (immutable values; emptied when it outgrows _ANALYSED_MAX)
_ANALYSED: dict[str, tuple[str, str, str] | bool] = {}
_ANALYSED_MAX = 500_000


# Character classes of the signature: a-z, 0-9, "_" (the folded separator); anything else shares one.
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789_"
_CLASSES = len(_ALPHABET) + 1
_CLASS_OF = np.full(256, len(_ALPHABET), dtype=np.int64)
_CLASS_OF[np.frombuffer(_ALPHABET.encode("ascii"), dtype=np.uint8)] = np.arange(len(_ALPHABET))


def _signatures(folded: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per string, (classes present, classes present twice or more) as uint64 bit masks. An edit changes at
    most two of these bits (a substitution: one class loses a character, another gains one), a swap none."""
    if not folded:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)
    data = np.frombuffer("".join(folded).encode("ascii", "replace"), dtype=np.uint8)
    owner = np.repeat(np.arange(len(folded)), [len(f) for f in folded])
    counts = np.bincount(owner * _CLASSES + _CLASS_OF[data], minlength=len(folded) * _CLASSES)
    counts = counts.reshape(len(folded), _CLASSES)
    return _pack(counts >= 1), _pack(counts >= 2)


def _pack(bits: np.ndarray) -> np.ndarray:
    """Rows of booleans (class i at column i) as uint64 masks with bit i set: `1 << i`, as `_signature`."""
    packed = np.zeros((len(bits), 8), dtype=np.uint8)
    packed[:, :(bits.shape[1] + 7) // 8] = np.packbits(bits, axis=1, bitorder="little")
    return packed.view("<u8").ravel().astype(np.uint64)


_CLASS_LIST = _CLASS_OF.tolist()


def _signature(text: str) -> tuple[np.uint64, np.uint64]:
    """`_signatures` of one string (a query token), without numpy's per-call overhead."""
    once = twice = 0
    for byte in text.encode("ascii", "replace"):
        bit = 1 << _CLASS_LIST[byte]
        twice |= once & bit
        once |= bit
    return np.uint64(once), np.uint64(twice)


if hasattr(np, "bitwise_count"):
    def _popcount(values: np.ndarray) -> np.ndarray:
        return np.bitwise_count(values)
else:  # numpy < 2
    _BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def _popcount(values: np.ndarray) -> np.ndarray:
        return _BYTE_BITS[values.view(np.uint8)].reshape(len(values), 8).sum(axis=1)


class Suggester:
    """Near misses over one snapshot's identifier keywords. Immutable once built; safe to share."""

    def __init__(self, snapshot: Vocabulary):
        # Built without a container object per keyword (ints and strings only): at 10,000 documents the young
        # lists and tuples would make the garbage collector walk the whole snapshot again and again.
        self._snapshot = snapshot
        spelled: dict[int, str] = {}  # term id -> the first spelling of an identifier-shaped keyword
        first: dict[str, int] = {}  # folded form -> its first term id
        also: dict[str, list[int]] = {}  # ... and the others (`mcp-bridge` and `mcp_bridge` fold alike: rare)
        digits: dict[str, str] = {}  # folded form -> its sorted digits
        term_id = snapshot.term_id
        analysed = _ANALYSED
        if len(analysed) > _ANALYSED_MAX:
            analysed.clear()
        for entry in snapshot.entries:
            for keyword in entry.keywords:
                found = analysed.get(keyword)
                if found is None:
                    found = analysed[keyword] = _analyse(keyword)
                if found is False:
                    continue
                term, folded, number = found
                tid = term_id.get(term)
                if tid is None or tid in spelled:
                    continue
                spelled[tid] = keyword
                if folded in first:
                    also.setdefault(folded, []).append(tid)
                else:
                    first[folded] = tid
                    digits[folded] = number
        self.spelled = spelled
        # The folded forms sorted by their digits, then length: the candidates of a token are one slice
        # (`_start`, `_end` by sorted digits), and a length window within it.
        folded_forms = sorted(first, key=len)
        folded_forms.sort(key=digits.__getitem__)  # stable: by digits, then length
        self._folded = folded_forms
        self._first = np.fromiter(map(first.__getitem__, folded_forms), dtype=np.int64, count=len(folded_forms))
        self._also = {i: tuple(also[f]) for i, f in enumerate(folded_forms) if f in also}
        self._lengths = np.fromiter(map(len, folded_forms), dtype=np.int64, count=len(folded_forms))
        self._start: dict[str, int] = {}
        self._end: dict[str, int] = {}
        for i, f in enumerate(folded_forms):
            number = digits[f]
            self._start.setdefault(number, i)
            self._end[number] = i + 1
        self._once, self._twice = _signatures(folded_forms)
        # written without separators -> the folded form ("mcpbridge" -> "mcp_bridge"): plain words may be that
        self._joined: dict[str, int] = {}
        for i, f in enumerate(folded_forms):
            if "_" in f:
                self._joined.setdefault(f.replace("_", ""), i)

    def __len__(self) -> int:
        """How many identifier keywords (normalised terms) can be suggested."""
        return len(self.spelled)

    # -- search ----------------------------------------------------------------------------------------
    def suggest(self, query: str, limit: int = MAX_SUGGESTIONS, lang: str | None = None) -> list[Suggestion]:
        """Up to `limit` keywords the identifiers of `query` probably meant, best first; [] when none is close.
        `lang` (a language code) picks which translation of a page names a suggestion."""
        if not self._folded or limit <= 0 or not isinstance(query, str):
            return []
        text = unicodedata.normalize("NFKC", query)
        best: dict[int, tuple[int, int]] = {}  # index into self._folded -> (edits, length difference), fewest
        searched = 0
        for token in dict.fromkeys(m.group() for m in itertools.islice(_TOKEN.finditer(text), MAX_SCANNED)):
            if not MIN_LENGTH <= len(token) <= MAX_LENGTH:
                continue
            term = normalize_term(token)
            if term in self._snapshot.term_id:
                continue  # a keyword itself (L0's business)
            folded = fold(term)
            if identifier_shaped(token):
                if searched == MAX_TOKENS:
                    continue
                searched += 1
                found = self._near(folded)
            else:  # a plain word: only an identifier keyword run together (`mcpbridge`)
                index = self._joined.get(folded)
                found = [] if index is None else [(index, self._folded[index].count("_"))]
                found = [(i, d) for i, d in found if d <= max_distance(len(folded))]
            for index, distance in found:
                key = (distance, abs(len(self._folded[index]) - len(folded)))
                if key < best.get(index, (99, 0)):
                    best[index] = key
        return self._claimants(best, limit, lang) if best else []

    def _near(self, token: str) -> list[tuple[int, int]]:
        """(index into self._folded, distance) of the folded keywords within reach of a folded token."""
        reach = max_distance(len(token))
        number = _digits(token)
        start, end = self._start.get(number), self._end.get(number)
        if not reach or start is None or end is None:
            return []
        lengths = self._lengths[start:end]
        lo = start + int(np.searchsorted(lengths, len(token) - reach, side="left"))
        hi = start + int(np.searchsorted(lengths, len(token) + reach, side="right"))
        if lo >= hi:
            return []
        once, twice = _signature(token)
        bits = _popcount(self._once[lo:hi] ^ once) + _popcount(self._twice[lo:hi] ^ twice)
        candidates = (np.flatnonzero(bits <= 2 * reach) + lo).tolist()
        if not candidates:
            return []
        folded = self._folded
        found = process.extract(token, [folded[i] for i in candidates], scorer=OSA.distance, processor=None,
                                score_cutoff=reach, limit=None)
        return [(candidates[j], int(distance)) for choice, distance, j in found if _numbers_agree(token, choice)]

    def _term_ids(self, index: int) -> tuple[int, ...]:
        """The term ids of the folded form at `index` (one, unless keywords differ only in separators)."""
        return (int(self._first[index]), *self._also.get(index, ()))

    def _claimants(self, best: dict[int, tuple[int, int]], limit: int, lang: str | None) -> list[Suggestion]:
        """Rank the near keywords (edits, rarer, closer in length, index order) and name one page for each."""
        snapshot = self._snapshot
        ranked = sorted((distance, snapshot.df[tid], length_difference, tid)
                        for index, (distance, length_difference) in best.items() for tid in self._term_ids(index))
        named: set[int] = set()  # translation groups already named
        out: list[Suggestion] = []
        for *_key, tid in ranked:
            pos = self._claimant(tid, named, lang)
            if pos is None:
                continue  # every page claiming it is named already
            entry = snapshot.entries[pos]
            named.add(int(snapshot.group_of[pos]))
            out.append(Suggestion(keyword=self.spelled[tid], source=entry.file_path, title=entry.title))
            if len(out) == limit:
                break
        return out

    def _claimant(self, tid: int, named: set[int], lang: str | None) -> int | None:
        """The document that names term `tid`: its first claimant in index order whose page is not named yet;
        of that page's versions claiming it, the one in `lang` when there is one."""
        snapshot = self._snapshot
        positions = snapshot.postings[tid].tolist()
        for pos in positions:
            group = int(snapshot.group_of[pos])
            if group in named:
                continue
            if lang and snapshot.entries[pos].lang != lang:
                for other in positions:
                    if int(snapshot.group_of[other]) == group and snapshot.entries[other].lang == lang:
                        return other
            return pos
        return None
