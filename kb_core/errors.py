"""The one exception root of kb_core: pages catch `KnowledgeBaseError` and show it."""

from __future__ import annotations


class KnowledgeBaseError(Exception):
    """Root of every error kb_core raises on purpose. The message is written for the person who sees it."""


class SettingsError(KnowledgeBaseError, ValueError):
    """A setting is invalid; the message names the setting."""
