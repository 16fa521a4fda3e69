"""Who may do what: roles, the acting identity, and the role map from settings (`auth.roles` / `KB_ROLES`).

Three roles, each including the one before: a **viewer** looks things up and reads documents and tool calls;
a **curator** also uploads, edits and deletes; an **admin** also reconciles, re-indexes and sees settings.
The console maps a signed-in user's e-mail address (or domain, or group) to a role; agents' in-process calls
and the CLI act as the service identity (`KB_SERVICE_IDENTITY`, an admin). The facade checks the actor on
every write (`KnowledgeBase.as_user`), so a page that shows a button by mistake still cannot write.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from kb_core.errors import AccessDeniedError, SettingsError


class Role(enum.IntEnum):
    VIEWER = 1
    CURATOR = 2
    ADMIN = 3

    @classmethod
    def parse(cls, name: str) -> Role:
        try:
            return cls[str(name).strip().upper()]
        except KeyError:
            raise SettingsError(f"unknown role {name!r}: use viewer, curator or admin") from None

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Actor:
    """Who acts: a signed-in user (`name` is the e-mail address) or a service identity (`agent`, `cli`,
    `mcp`, `watcher`); recorded on every write."""

    name: str
    role: Role
    # the audiences whose pages it reads (`documents.scope`); None: every page (curators, admins, services)
    audiences: frozenset[str] | None = None

    def require(self, role: Role, action: str) -> None:
        if self.role < role:
            raise AccessDeniedError(f"{self.name} ({self.role.label}) may not {action}: it needs the "
                                    f"{role.label} role")

    def may(self, role: Role) -> bool:
        return self.role >= role


def audiences_of(role: Role, groups: Iterable[str], group_audiences: Mapping[str, Iterable[str]]) -> \
        frozenset[str] | None:
    """What a signed-in user reads: curators and admins manage the files, so every page; a viewer
    the audiences its sign-in groups map to (`auth.group-audiences`), and pages for everyone. Without a
    mapping nothing is limited (None)."""
    if role >= Role.CURATOR or not group_audiences:
        return None
    mapped = {str(g).casefold(): tuple(a) for g, a in group_audiences.items()}
    return frozenset(a for g in groups for a in mapped.get(str(g).casefold(), ()))


def service_actor(name: str = "agent") -> Actor:
    """Agents' in-process calls, the CLI and the watcher act with every right: they run on the server itself."""
    return Actor(name, Role.ADMIN)


def _true(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


@dataclass(frozen=True)
class SignedIn:
    """Who a sign-in says the visitor is, as far as it can be trusted: `email` only when the
    provider vouches for it (`email_verified` true), the issuer and subject (stable, never reassigned), the
    groups of the token; `claimed_email`, what the token says either way (shown, never matched)."""

    email: str | None
    issuer: str | None
    subject: str | None
    groups: tuple[str, ...] = ()
    claimed_email: str | None = None

    @classmethod
    def of_claims(cls, claims: Mapping[str, object]) -> SignedIn:
        """From the ID token's claims (`st.user`): an e-mail address counts as verified only where the token
        says `email_verified: true` - absent (Microsoft Entra ID sends none) or false, it is not."""
        email = claims.get("email")
        email = email.strip() if isinstance(email, str) and email.strip() else None
        groups = claims.get("groups") or ()
        groups = tuple(str(g) for g in (groups if isinstance(groups, (list, tuple)) else [groups]))
        issuer, subject = claims.get("iss"), claims.get("sub")
        return cls(email=email if email and _true(claims.get("email_verified")) else None,
                   issuer=str(issuer).rstrip("/") if issuer else None, subject=str(subject) if subject else None,
                   groups=groups, claimed_email=email)

    @property
    def name(self) -> str:
        """What writes are recorded as: the verified address, else issuer and subject."""
        if self.email:
            return self.email
        if self.subject:
            return f"{self.subject} ({self.issuer})" if self.issuer else self.subject
        return self.claimed_email or "unknown"


@dataclass(frozen=True)
class RoleMap:
    """E-mail addresses, domains (`@example.com` or `example.com`), groups (`group:ops`) and subjects
    (`sub:<issuer>|<subject>`, the token's `iss` and `sub`) -> roles. The most specific entry wins (subject, then
    address, then group, then domain); several groups: the highest role. Addresses and domains match a verified
    e-mail address only (`SignedIn`)."""

    addresses: Mapping[str, Role]
    domains: Mapping[str, Role]
    groups: Mapping[str, Role]
    subjects: Mapping[str, Role] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, str] | str | None) -> RoleMap:
        """From `auth.roles` in kb.yaml (a mapping) or `KB_ROLES` (JSON, or `who=role,who=role`)."""
        if raw is None or raw == "":
            return cls({}, {}, {})
        if isinstance(raw, str):
            text = raw.strip()
            if text.startswith("{"):
                try:
                    raw = json.loads(text)
                except ValueError as exc:
                    raise SettingsError(f"KB_ROLES is not valid JSON: {exc}") from exc
            else:
                pairs = [p for p in (part.strip() for part in text.split(",")) if p]
                if any("=" not in p for p in pairs):
                    raise SettingsError("KB_ROLES must be JSON or 'who=role,who=role'")
                raw = dict(p.split("=", 1) for p in pairs)
        if not isinstance(raw, Mapping):
            raise SettingsError("auth.roles must map e-mail addresses, domains or groups to roles")
        addresses: dict[str, Role] = {}
        domains: dict[str, Role] = {}
        groups: dict[str, Role] = {}
        subjects: dict[str, Role] = {}
        for who, role_name in raw.items():
            key = str(who).strip().casefold()
            role = Role.parse(role_name)
            if key.startswith("sub:"):
                issuer, bar, subject = str(who).strip()[len("sub:"):].rpartition("|")
                if not bar or not issuer.strip() or not subject.strip():
                    raise SettingsError(f"auth.roles: {who!r} must read sub:<issuer>|<subject> (the token's iss "
                                        "and sub claims)")
                subjects[f"{issuer.strip().rstrip('/')}|{subject.strip()}"] = role
            elif key.startswith("group:"):
                groups[key[len("group:"):].strip()] = role
            elif key.startswith("@") or "@" not in key:
                domains[key.lstrip("@")] = role
            else:
                addresses[key] = role
        return cls(addresses, domains, groups, subjects)

    def role_of_sign_in(self, who: SignedIn) -> Role | None:
        """The role of a signed-in visitor, or `None`: not allowed in at all. An unverified e-mail address
        matches no address or domain entry."""
        if who.issuer and who.subject:
            role = self.subjects.get(f"{who.issuer}|{who.subject}")
            if role is not None:
                return role
        return self.role_of(who.email, who.groups)

    def role_of(self, email: str | None, groups: Iterable[str] = ()) -> Role | None:
        """The role of a signed-in user, or `None`: not allowed in at all."""
        if email:
            address = email.strip().casefold()
            if address in self.addresses:
                return self.addresses[address]
        found = [self.groups[g] for g in (str(g).casefold() for g in groups) if g in self.groups]
        if found:
            return max(found)
        if email and "@" in email:
            domain = email.strip().casefold().rsplit("@", 1)[1]
            if domain in self.domains:
                return self.domains[domain]
        return None

    def __bool__(self) -> bool:
        return bool(self.addresses or self.domains or self.groups or self.subjects)


_ACTING: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("kb_acting", default=None)


@contextlib.contextmanager
def acting(actor: Actor) -> Iterator[None]:
    """Every write made inside records `actor` as who did it (the change feed, the document row)."""
    token = _ACTING.set(actor)
    try:
        yield
    finally:
        _ACTING.reset(token)


def acting_name() -> str | None:
    """Who the write in progress acts for; None outside any facade call (recovery at open)."""
    actor = _ACTING.get()
    return actor.name if actor is not None else None
