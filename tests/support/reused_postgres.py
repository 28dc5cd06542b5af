"""A test's migrated Postgres database emptied for the next test, where copying a new one from the template takes
50-150 ms (a checkpoint of the whole server each time) and emptying one 10.

A database is handed on only when it is as a copy would be: no connection left to it, its schema (tables, columns,
triggers, functions, constraints, extensions, schemas, schema_version, owner, settings) the template's, every table
but schema_version empty, every sequence at its start. A test that changed the schema (a refusing trigger, the
vector table, a role owning it) leaves a database that is dropped instead.
"""

from __future__ import annotations

import asyncpg

# What a copy of the template has in common with the template, and a test may change: the catalog of its own
# objects, read by name and definition (temporary schemas, which sessions leave behind, are not the schema).
_SCHEMA = """
SELECT md5(string_agg(item, E'\\n' ORDER BY item)) FROM (
    SELECT format('relation %s %s %s', relname, relkind, relowner) FROM pg_class
    WHERE relnamespace = 'public'::regnamespace
    UNION ALL
    SELECT format('column %s.%s %s %s %s', c.relname, a.attname, a.atttypid, a.attnotnull, a.atthasdef)
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT format('trigger %s %s %s', t.tgname, c.relname, t.tgenabled)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = 'public'::regnamespace
    UNION ALL
    SELECT format('function %s %s', proname, md5(prosrc)) FROM pg_proc
    WHERE pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
    UNION ALL
    SELECT format('constraint %s %s', conname, pg_get_constraintdef(oid)) FROM pg_constraint
    WHERE connamespace = 'public'::regnamespace
    UNION ALL
    SELECT format('extension %s %s', extname, extversion) FROM pg_extension
    UNION ALL
    SELECT format('schema %s %s', nspname, nspowner) FROM pg_namespace WHERE nspname !~ '^pg_(toast_)?temp_'
    UNION ALL
    SELECT format('version %s', version) FROM schema_version
    UNION ALL
    SELECT format('database %s %s', datdba, datallowconn) FROM pg_database WHERE datname = current_database()
    UNION ALL
    SELECT format('setting %s %s', setrole, setconfig) FROM pg_db_role_setting
) AS schema(item)
"""

# Every table but schema_version emptied and every sequence restarted, in one round trip. Replica mode skips the
# triggers, the foreign keys' among them (no order to delete in) and the shared settings' NOTIFY (no one listens).
_EMPTYING = """
SELECT string_agg(statement, E';\\n') FROM (
    SELECT format('DELETE FROM %I', tablename) FROM pg_tables
    WHERE schemaname = 'public' AND tablename <> 'schema_version'
    UNION ALL
    SELECT format('SELECT setval(%L, %s, false)', seqrelid::regclass, seqstart) FROM pg_sequence
) AS emptying(statement)
"""


async def schema_of(url: str) -> str:
    """A digest of the schema of the database at `url`."""
    connection = await asyncpg.connect(url)
    try:
        digest: str = await connection.fetchval(_SCHEMA)
    finally:
        await connection.close()
    return digest


async def emptied(server_url: str, name: str, url: str, schema: str) -> bool:
    """Empty database `name` (at `url`) for the next test, if its schema is still `schema`; whether it was."""
    server = await asyncpg.connect(server_url)
    try:
        # A session the test left open (a bot not stopped, a lock held) ends first; waits up to 5 s for each.
        await server.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = $1", name)
    finally:
        await server.close()
    connection = await asyncpg.connect(url)
    try:
        if await connection.fetchval(_SCHEMA) != schema:
            return False
        statements = await connection.fetchval(_EMPTYING)
        await connection.execute(f"SET session_replication_role = replica;\nBEGIN;\n{statements};\nCOMMIT")
    finally:
        await connection.close()
    return True
