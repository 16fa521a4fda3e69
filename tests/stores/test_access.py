"""Roles and the acting identity: the facade refuses what a role may not do, whatever the page
shows, and records who made every write. Real stores (SQLite, Milvus Lite)."""

from __future__ import annotations

import pytest
from support.documents import doc

from kb_core import KnowledgeBaseError
from kb_core.access import Actor, Role, RoleMap, acting, acting_name, service_actor
from kb_core.bootstrap import parts_of
from kb_core.errors import AccessDeniedError, SettingsError

VIEWER = Actor("vera@example.com", Role.VIEWER)
CURATOR = Actor("carl@example.com", Role.CURATOR)
ADMIN = Actor("ada@example.com", Role.ADMIN)


@pytest.fixture
def kb(open_kb, sample_root, db_url):
    return open_kb(sample_root, db_url=db_url, reconcile=True)


def test_role_map_from_settings_most_specific_entry_wins():
    roles = RoleMap.parse({"ada@example.com": "admin", "@example.com": "viewer", "partner.org": "curator",
                           "group:kb-editors": "curator"})
    assert roles.role_of("ADA@example.com") is Role.ADMIN  # addresses ignore case
    assert roles.role_of("bob@example.com") is Role.VIEWER
    assert roles.role_of("bob@example.com", ["KB-Editors"]) is Role.CURATOR  # a group beats the domain
    assert roles.role_of("eve@partner.org") is Role.CURATOR
    assert roles.role_of("mallory@elsewhere.net") is None and roles.role_of(None) is None
    assert RoleMap.parse("a@x.io=admin, @x.io=viewer").role_of("b@x.io") is Role.VIEWER
    assert RoleMap.parse('{"a@x.io": "curator"}').role_of("a@x.io") is Role.CURATOR
    assert not RoleMap.parse(None)
    with pytest.raises(SettingsError, match="unknown role 'owner'"):
        RoleMap.parse({"a@x.io": "owner"})
    with pytest.raises(SettingsError, match="JSON or"):
        RoleMap.parse("a@x.io")


def test_acting_is_scoped_to_the_block():
    assert acting_name() is None
    with acting(CURATOR):
        assert acting_name() == "carl@example.com"
        with acting(service_actor("watcher")):
            assert acting_name() == "watcher"
        assert acting_name() == "carl@example.com"
    assert acting_name() is None


def test_a_viewer_cannot_write_and_nothing_is_written(kb, sample_root):
    view = kb.as_user(VIEWER)
    before = kb.status().counts
    with pytest.raises(AccessDeniedError, match=r"vera@example.com \(viewer\) may not upload documents"):
        view.documents.upload("new.md", doc("New", ["brand-new-keyword"]).encode(), "api")
    assert not (sample_root / "knowledge_base/api/new.md").exists()
    assert kb.status(max_age=0).counts == before and kb.documents.entry("knowledge_base/api/new.md") is None
    record = kb.documents.list()[0]
    with pytest.raises(AccessDeniedError):
        view.documents.delete(record.id)
    with pytest.raises(AccessDeniedError):
        view.documents.reconcile()
    assert kb.documents.get(record.id) is not None
    # reading is what a viewer is for
    assert view.lookup_knowledge("ERR_TIMEOUT")["found"] is True
    assert isinstance(AccessDeniedError("x"), KnowledgeBaseError)  # pages catch the one root


def test_a_curator_writes_and_is_recorded_but_cannot_reconcile(kb):
    view = kb.as_user(CURATOR)
    outcome = view.documents.upload("by-carl.md", doc("By Carl", ["carl-only-keyword"]).encode(), "api")
    record = kb.documents.get(outcome.document.id)
    assert record.changed_by == "carl@example.com"
    assert kb.status().counts.database == len(kb.documents.list())  # the view's write moved the shared version
    with pytest.raises(AccessDeniedError, match="needs the admin role"):
        view.documents.reconcile()
    with pytest.raises(AccessDeniedError):
        view.documents.reindex_all()
    kb.as_user(ADMIN).documents.reconcile()
    view.documents.delete(record.id)
    assert kb.documents.get(record.id) is None


def test_calls_without_a_user_act_as_the_service_identity(kb):
    assert kb.actor == Actor("agent", Role.ADMIN)
    outcome = kb.documents.upload("agent-doc.md", doc("Agent doc", ["agent-only-keyword"]).encode(), "api")
    assert kb.documents.get(outcome.document.id).changed_by == "agent"
    metadata = parts_of(kb).metadata
    changes, _ = metadata.changes_since(0)
    assert changes  # the feed's rows carry the actor too
    from sqlalchemy import select

    from kb_core.storage.db_models import Change

    with metadata._read() as session:  # noqa: SLF001 - the column itself, not a public view of it
        actors = session.scalars(select(Change.actor).where(Change.file_path == outcome.document.file_path)).all()
    assert actors and set(actors) == {"agent"}


def test_settings_as_an_admin_reads_them_hide_secrets(tmp_path):
    from kb_core import load_settings

    settings = load_settings(app_root=tmp_path, database_url="mysql+pymysql://kb:s3cret@db:3306/kb",
                             milvus_token="root:Milvus")
    shown = dict(settings.described())
    assert shown["KB_DATABASE_URL"] == "mysql+pymysql://kb:***@db:3306/kb"
    assert shown["KB_MILVUS_TOKEN"] == "*** (set)" and "KB_CONFIG" in shown
    assert not any("s3cret" in value or "Milvus" in value for value in shown.values())


def test_the_settings_and_versions_are_for_admins(kb):
    for actor in (VIEWER, CURATOR):
        with pytest.raises(AccessDeniedError, match="may not read the settings"):
            kb.as_user(actor).about()
    about = kb.as_user(ADMIN).about()
    versions = {part.name: part.version for part in about.parts}
    on_sqlite = kb.settings.database_url.startswith("sqlite")
    assert versions["database"].startswith("SQLite 3.") if on_sqlite else "MariaDB" in versions["database"]
    assert versions["milvus"].startswith("milvus_lite-")
    assert versions["streamlit"] != "not installed" and versions["python"].startswith("3.")
    assert dict(about.settings)["KB_DATABASE_URL"].split(":")[0] == kb.settings.database_url.split(":")[0]


def test_a_database_password_is_masked_in_the_settings(kb):
    masked = kb.settings.model_copy(update={"database_url": "mysql+pymysql://kb:s3cret@db.example:3306/kb"})
    assert dict(masked.described())["KB_DATABASE_URL"] == "mysql+pymysql://kb:***@db.example:3306/kb"


def test_only_a_verified_email_matches_an_address_or_a_domain():
    from kb_core.access import RoleMap, SignedIn

    roles = RoleMap.parse({"ada@example.com": "admin", "@example.com": "viewer", "group:ops": "curator",
                           "sub:https://idp.example/|42": "curator"})
    verified = SignedIn.of_claims({"email": "Ada@example.com", "email_verified": True})
    assert roles.role_of_sign_in(verified) == Role.ADMIN and verified.name == "Ada@example.com"
    for flag in (False, "false", "no", None, 1):
        claims = {"email": "ada@example.com", "iss": "https://other.example", "sub": "7"}
        if flag is not None:
            claims["email_verified"] = flag
        who = SignedIn.of_claims(claims)
        assert who.email is None and who.claimed_email == "ada@example.com"
        assert roles.role_of_sign_in(who) is None, flag  # neither the address nor the domain
    assert SignedIn.of_claims({"email_verified": "TRUE", "email": "x@example.com"}).email == "x@example.com"
    # the subject of its issuer (a trailing slash either way), and groups, need no e-mail address
    assert roles.role_of_sign_in(SignedIn.of_claims({"iss": "https://idp.example", "sub": "42"})) == Role.CURATOR
    assert roles.role_of_sign_in(SignedIn.of_claims({"iss": "https://evil.example", "sub": "42"})) is None
    assert roles.role_of_sign_in(SignedIn.of_claims({"sub": "9", "groups": ["ops"]})) == Role.CURATOR
    with pytest.raises(SettingsError, match="sub:<issuer>"):
        RoleMap.parse({"sub:no-bar": "admin"})
