"""The message archive: one interface, a SQLite and a Postgres backend."""
