"""Configuration of the knowledge base path, as the spec asks (and the rest of the settings object)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_core import KnowledgeIndex, Settings, SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("KB_APP_ROOT", "KB_CONFIG", "KB_BASE_PATH", "KB_DATABASE_URL", "KB_MILVUS_URI",
                 "KB_MAX_UPLOAD_BYTES", "KB_EMBEDDING_MODEL"):
        monkeypatch.delenv(name, raising=False)


def test_req_9_1_default_base_path_is_knowledge_base(tmp_path):
    settings = load_settings(app_root=tmp_path)
    assert settings.base_path == "knowledge_base/"
    assert settings.base_dir == tmp_path / "knowledge_base"


def test_req_9_1_absolute_path_from_yaml_is_used_as_is(tmp_path):
    (tmp_path / "kb.yaml").write_text("knowledge:\n  base-path: /data/knowledge_base/\n")
    settings = load_settings(app_root=tmp_path)
    assert settings.base_path == "/data/knowledge_base/"
    assert settings.base_dir == Path("/data/knowledge_base")


def test_req_9_1_relative_path_resolves_against_the_app_root(tmp_path, monkeypatch):
    (tmp_path / "kb.yaml").write_text("knowledge:\n  base-path: docs/kb\n")
    monkeypatch.chdir("/")
    monkeypatch.setenv("KB_APP_ROOT", str(tmp_path))
    settings = load_settings()
    assert settings.base_dir == tmp_path / "docs/kb"
    index = KnowledgeIndex(settings.base_path, app_root=settings.app_root)
    index.load()
    assert (tmp_path / "docs/kb").is_dir()


def test_env_base_path_wins_over_yaml(tmp_path, monkeypatch):
    (tmp_path / "kb.yaml").write_text("knowledge:\n  base-path: from-yaml\n")
    monkeypatch.setenv("KB_BASE_PATH", "from-env")
    assert load_settings(app_root=tmp_path).base_path == "from-env"


def test_kb_config_names_another_yaml_file(tmp_path, monkeypatch):
    (tmp_path / "custom.yaml").write_text("knowledge:\n  base-path: custom-kb\nupload:\n  max-bytes: 1024\n")
    monkeypatch.setenv("KB_CONFIG", str(tmp_path / "custom.yaml"))
    settings = load_settings(app_root=tmp_path)
    assert settings.base_path == "custom-kb" and settings.max_upload_bytes == 1024


def test_missing_named_config_file_names_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_CONFIG", str(tmp_path / "nope.yaml"))
    with pytest.raises(SettingsError, match="KB_CONFIG"):
        load_settings(app_root=tmp_path)


@pytest.mark.parametrize(
    ("env", "value", "named"),
    [("KB_BASE_PATH", "  ", "KB_BASE_PATH"), ("KB_MAX_UPLOAD_BYTES", "-1", "KB_MAX_UPLOAD_BYTES"),
     ("KB_MAX_UPLOAD_BYTES", "lots", "KB_MAX_UPLOAD_BYTES"), ("KB_APP_ROOT", "/no/such/dir", "KB_APP_ROOT")],
)
def test_invalid_settings_fail_at_construction_naming_the_setting(tmp_path, monkeypatch, env, value, named):
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError, match=named):
        load_settings()


def test_invalid_yaml_config_fails_clearly(tmp_path):
    (tmp_path / "kb.yaml").write_text("knowledge: [unclosed\n")
    with pytest.raises(SettingsError, match="KB_CONFIG"):
        Settings(app_root=tmp_path)


def test_embedded_defaults_live_under_the_app_root(tmp_path):
    settings = load_settings(app_root=tmp_path)
    assert settings.resolved_database_url == f"sqlite:///{tmp_path.as_posix()}/kb.sqlite3"
    assert settings.resolved_milvus_uri == str(tmp_path / "kb_milvus.db")
    remote = load_settings(app_root=tmp_path, milvus_uri="http://milvus:19530")
    assert remote.resolved_milvus_uri == "http://milvus:19530"


def test_settings_and_l0_index_resolve_base_path_alike(tmp_path, monkeypatch):
    """One resolver: `~` in base_path means the home directory to both, not a folder named '~'."""
    from kb_core import KnowledgeIndex

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    settings = load_settings(app_root=tmp_path, base_path="~/kb")
    index = KnowledgeIndex(settings.base_path, app_root=settings.app_root)
    assert settings.base_dir == index.folder.base_dir == tmp_path / "home/kb"
