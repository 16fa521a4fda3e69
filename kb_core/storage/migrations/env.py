"""Alembic environment. kb_core runs migrations itself (`MetadataStore.migrate`), handing over a connection
in `config.attributes["connection"]`; the operator command `kb migrate` (kb_core/storage/migrate.py) does the same."""

from alembic import context

from kb_core.storage.db_models import Base

config = context.config
target_metadata = Base.metadata

connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - always called through kb_core
    raise RuntimeError("run migrations through `kb migrate`, which supplies the connection")

context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
