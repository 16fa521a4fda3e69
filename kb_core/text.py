"""Text normalisation shared by the frontmatter parser (de-duplication) and the L0 index (matching)."""

from __future__ import annotations

import unicodedata


def normalize_term(text: str) -> str:
    """NFKC, casefold, trim: "ＥＲＲ＿ＴＩＭＥＯＵＴ " and "err_timeout" normalise alike.

    NUL is dropped because the L0 index uses it as a separator between keywords.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return folded.replace("\x00", "").strip()
