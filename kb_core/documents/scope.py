"""What one caller may read, and what one question is narrowed to. Pure values.

A page's **audience** is its frontmatter `audience: [group, …]`, or, without one, the default `kb.yaml` gives
its folder (`audiences: {internal/runbooks: [ops]}`: the deepest folder listed wins); a page with neither is
for everyone. A caller carries audiences (a named MCP token's, a console user's groups mapped in `kb.yaml`, an
in-process agent's service identity: all by default) and may be limited to some categories (a token's
`categories`). A question may be narrowed further by the agent: `category` (a folder, with its sub-folders)
and `language`.

`Scope` joins the three: a page is in scope when the caller may read it *and* it is in the question's
category and language. Every path that can show a page asks the same `Scope.admits`, with the page's
effective audience (`AudienceRule.of`); a page outside the caller's audiences or categories does not exist
for that caller (a missing page's answer), one outside the question's filters is simply not searched.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from kb_core.documents.language import normalize_language
from kb_core.documents.path_rule import category_problem
from kb_core.errors import InvalidInputError

UNDETERMINED = "und"  # the language of a text whose script says nothing (`language.document_language`)


def _strings(values: object, what: str) -> list[str]:
    if isinstance(values, str):
        values = (values,)
    if not isinstance(values, Collection) or not all(isinstance(v, str) for v in values):
        raise InvalidInputError(f"{what} must be a list of strings, got {values!r}")
    return [v.strip() for v in values if v.strip()]


def check_categories(values: object, what: str = "categories") -> tuple[str, ...]:
    """Folder paths (`a/b`, slashes at the ends dropped), sorted and distinct; `InvalidInputError` names one
    that is not a valid category."""
    found = []
    for category in _strings(values, what):
        category = category.strip("/")
        problem = category_problem(category)
        if problem is not None:
            raise InvalidInputError(f"invalid category {category!r}: {problem}")
        found.append(category)
    return tuple(sorted(set(found)))


def check_languages(values: object, what: str = "languages") -> tuple[str, ...]:
    """Language tags as documents carry them (`zh-CN` is `zh`; `und`: undetermined), sorted and distinct."""
    found = []
    for tag in _strings(values, what):
        language = UNDETERMINED if tag.lower() == UNDETERMINED else normalize_language(tag)
        if language is None:
            raise InvalidInputError(f"unknown language {tag!r}: use a tag such as en, zh or zh-CN (und: undetermined)")
        found.append(language)
    return tuple(sorted(set(found)))


def in_folders(category: str | None, folders: Iterable[str]) -> bool:
    """Whether `category` is one of `folders` or lies below one (`apisix/docs` takes `apisix/docs/en`, not
    `apisix/docs-old`)."""
    category = category or ""
    return any(category == f or category.startswith(f + "/") for f in folders)


@dataclass(frozen=True)
class AudienceRule:
    """The knowledge base's folder defaults: (folder, groups) pairs from `kb.yaml`'s `audiences`."""

    defaults: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def of_mapping(cls, mapping: Mapping[str, object] | None) -> AudienceRule:
        pairs = []
        for folder, groups in (mapping or {}).items():
            (name,) = check_categories([folder], "an audiences folder") or ("",)
            pairs.append((name, tuple(sorted(set(_strings(groups, f"the audiences of {folder!r}"))))))
        # the deepest folder first: `internal/runbooks` overrides `internal`
        return cls(tuple(sorted(pairs, key=lambda p: -p[0].count("/") - bool(p[0]))))

    def of(self, category: str | None, audience: tuple[str, ...]) -> tuple[str, ...]:
        """A page's effective audience: its own, else its folder's default, else () (everyone)."""
        if audience or not self.defaults:
            return audience
        for folder, groups in self.defaults:
            if not folder or in_folders(category, (folder,)):
                return groups
        return ()


EVERYONE = AudienceRule()


@dataclass(frozen=True)
class Scope:
    """`categories` and `languages`: the question's filters (empty: all); `audiences`: the caller's groups
    (None: the caller reads every page); `allowed_categories`: the folders the caller is limited to (empty:
    all). Hashable: a knowledge base keeps one page mask per scope and index version."""

    categories: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    audiences: frozenset[str] | None = None
    allowed_categories: tuple[str, ...] = ()
    rule: AudienceRule = EVERYONE

    @property
    def everything(self) -> bool:
        """Nothing narrows it: every page is in scope (the default path pays nothing)."""
        return not (self.categories or self.languages or self.allowed_categories) and self.audiences is None

    def may_read(self, category: str | None, audience: tuple[str, ...]) -> bool:
        """Whether the caller may read a page of this category and own audience (the question's filters
        aside): what decides whether the page exists for the caller."""
        if self.allowed_categories and not in_folders(category, self.allowed_categories):
            return False
        if self.audiences is None:
            return True
        effective = self.rule.of(category, audience)
        return not effective or not self.audiences.isdisjoint(effective)

    def admits(self, category: str | None, lang: str, audience: tuple[str, ...]) -> bool:
        """Whether a page is in scope: the caller may read it, and it is in the question's category and
        language."""
        if self.categories and not in_folders(category, self.categories):
            return False
        if self.languages and lang not in self.languages:
            return False
        return self.may_read(category, audience)

    def admits_entry(self, entry: object) -> bool:
        """`admits` for an L0 entry (anything with `category`, `lang` and `audience`)."""
        return self.admits(getattr(entry, "category", None), getattr(entry, "lang", UNDETERMINED),
                           getattr(entry, "audience", ()))

    def describe(self) -> str:
        parts = []
        if self.categories:
            parts.append("category " + ", ".join(self.categories))
        if self.languages:
            parts.append("language " + ", ".join(self.languages))
        return "; ".join(parts)


ALL = Scope()
