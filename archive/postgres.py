"""Postgres archive (asyncpg): the same interface as archive/sqlite.py, for processes sharing one database.

Writes are queued on the event loop and committed in batches by one writer task per process, in
order, one transaction per batch; reads run on a small pool and see committed data only. Ids (decisions,
summaries, memories) come from the database's identity sequences, so any number of processes can write.

Full-text search indexes each message's words as `archive.folded_words` gives them (lowercased, without
diacritics: FTS5's ``unicode61 remove_diacritics 2``) in a ``tsvector`` column with a GIN index, each lexeme
but the commonest words' prefixed by its channel, so a search reads only that channel's matches (as SQLite's
per-channel key ranges do);
the planner reads a rare word's matches off the index and a common word's off the channel's newest rows, and
``ts_rank`` ranks the channel's newest 400 matches. Queries are built from the same plain words as SQLite's, so no
search syntax from a member or the model ever reaches a tsquery.

Writes are made ready for the database (words folded into tsvector text) while the previous batch is on the
server; a run of adds is one binary COPY and one statement.

Times are integer unix milliseconds (UTC), as in SQLite, so both backends share their row conversions.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import asyncpg

from archive import (
    DatabaseUrlError,
    Write,
    describe_database_url,
    folded_words,
    search_words,
)
from archive.allowances import PostgresAllowances
from archive.bot_reads import BotReads
from archive.bot_writes import write_kinds
from archive.claim import ArchiveClaim
from archive.digests import DigestTables
from archive.file_text import FileTextBudget, day_of
from archive.knowledge import POSTGRES_KNOWLEDGE, KnowledgeTables
from archive.member_models import MemberModelRows
from archive.members import NOT_OPTED_OUT, MemberTables, withheld
from archive.message_reads import SEARCH_CANDIDATES, MessageDialect, MessageReads
from archive.moderation import ModerationTables
from archive.pin_channels import PinChannelRows
from archive.reminders import ReminderTables
from archive.stores import MEMORY_COLUMNS, MEMORY_SCOPE, RECALL_CANDIDATES, StoreTables
from archive.support_channels import SupportChannelRows
from archive.support_feedback import FeedbackRows
from archive.vectors import POSTGRES_QUEUE_TABLE
from archive.vectors_postgres import PostgresVectorTables
from archive.writer import BatchWriter, Run

__all__ = ["MIGRATIONS", "PostgresArchive", "tsquery_expression"]

logger = logging.getLogger(__name__)

_MS_PER_HOUR = 3_600_000
_MS_PER_DAY = 24 * _MS_PER_HOUR
# The longest word indexed, in bytes: a tsvector's lexemes hold at most 2046 (to_tsvector leaves longer words out),
# less the longest channel prefix ("ffffffffffffffffx").
_MAX_WORD_BYTES = 2046 - 17
# "':1", "':2", ...: what ends each word's lexeme in tsvector text; words past the last position share it, as in
# to_tsvector.
_POSITIONS = tuple(f"':{position}" for position in range(1, 16384))
# Serialises migrations between processes starting together (any constant unique to Parley).
# Memories ranked with ts_rank over the words column the schema generates from the fact, the newest in-scope
# matches only (`RECALL_CANDIDATES`).
_RECALL_MEMORIES_SQL = f"""
SELECT {MEMORY_COLUMNS} FROM (
    SELECT {", ".join("m." + name for name in MEMORY_COLUMNS.split(", "))}, ts_rank(m.words, query) AS score
    FROM memories AS m, to_tsquery('simple', :match) AS query
    WHERE m.words @@ query AND {MEMORY_SCOPE}
    ORDER BY m.id DESC
    LIMIT {RECALL_CANDIDATES}
) AS candidates
ORDER BY score DESC, id DESC
LIMIT :limit
"""
_MIGRATION_LOCK = 0x7061726C6579
# The first key of count claims' two-key transaction locks ("clms"; archive/exclusive.py's shards use "prly"); the
# second is the scope's id folded into 31 bits: two servers that fold alike only wait for each other's claims.
_CLAIM_LOCK_SPACE = 0x636C6D73
_CONNECT_TIMEOUT = 10.0

_MESSAGE_COLUMNS = (
    "message_id, guild_id, channel_id, author_id, author_name, content,"
    " created_at, edited_at, is_bot, reply_to_message_id,"
    " mention_ids, reply_to_author_id, mentions_everyone"
)

# Words indexed without their channel: archive's stopwords as of v12. A search leaves them out unless they are all
# it has, and a few huge posting lists cost the index much less to extend than a key per channel for each (they
# are about half of all words said). Changing the list needs a migration that rewrites `messages.words`.
_CHANNEL_FREE_WORDS = frozenset(
    """
    a about after all also am an and any are as at be been but by can could did
    do does for from had has have he her him his how i if in into is it its me
    my no not of on or our she so than that the their them then there these
    they this to us was we were what when where which who why will with would
    you your
    """.split()
)

# Ordered schema migrations, numbered as SQLite's (entry N-1 takes the database from version N-1 to N), so a
# table added to both backends gets the same number. Append new scripts, never edit shipped ones.
MIGRATIONS: tuple[str, ...] = (
    # v1: the message archive with its full-text index.
    """
    CREATE TABLE messages (
        message_id          BIGINT  PRIMARY KEY,
        guild_id            BIGINT  NOT NULL,
        channel_id          BIGINT  NOT NULL,
        author_id           BIGINT  NOT NULL,
        author_name         TEXT    NOT NULL,
        content             TEXT    NOT NULL,
        created_at          BIGINT  NOT NULL,
        edited_at           BIGINT,
        is_bot              BOOLEAN NOT NULL,
        reply_to_message_id BIGINT,
        -- archive.folded_words(content), as 'simple' lexemes.
        words               TSVECTOR NOT NULL
    );
    CREATE INDEX messages_channel_time ON messages (channel_id, created_at, message_id) INCLUDE (author_id);
    -- Words only: a (channel_id, words) index (btree_gin) intersects every search with the channel's whole
    -- posting list, about 10x slower for a topic word; rows of other channels are dropped on the heap instead.
    -- A search reads GIN's whole list of not yet merged entries: kept small, it never costs more than a millisecond.
    CREATE INDEX messages_words ON messages USING gin (words) WITH (gin_pending_list_limit = 256);
    -- Every channel that has had a message, with its server: deleting a server finds its messages here.
    CREATE TABLE channels (
        channel_id BIGINT PRIMARY KEY,
        guild_id   BIGINT NOT NULL
    );
    CREATE INDEX channels_guild ON channels (guild_id);
    """,
    # v2: per-channel settings and the reply-decision log.
    """
    CREATE TABLE channel_settings (
        channel_id BIGINT PRIMARY KEY,
        guild_id   BIGINT NOT NULL,
        mode       TEXT   NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX channel_settings_guild ON channel_settings (guild_id);
    CREATE TABLE decisions (
        id          BIGINT  GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        channel_id  BIGINT  NOT NULL,
        message_id  BIGINT  NOT NULL,
        author_name TEXT    NOT NULL,
        excerpt     TEXT    NOT NULL,
        responded   BOOLEAN NOT NULL,
        reason      TEXT    NOT NULL,
        tier        TEXT    NOT NULL,
        confidence  DOUBLE PRECISION,
        decided_at  BIGINT  NOT NULL
    );
    CREATE INDEX decisions_channel_time ON decisions (channel_id, decided_at);
    CREATE INDEX decisions_message ON decisions (message_id);
    CREATE INDEX decisions_time ON decisions (decided_at);
    """,
    # v3: tokens the model used for answers, per UTC day, server, channel and member.
    """
    CREATE TABLE token_usage (
        day           INTEGER NOT NULL, -- UTC days since 1970-01-01
        guild_id      BIGINT  NOT NULL,
        channel_id    BIGINT  NOT NULL,
        member_id     BIGINT  NOT NULL,
        input_tokens  BIGINT  NOT NULL,
        output_tokens BIGINT  NOT NULL,
        answers       BIGINT  NOT NULL,
        PRIMARY KEY (day, guild_id, channel_id, member_id)
    );
    """,
    # v4: whom each message mentioned or replied to; each channel's /parley-admin forget marker.
    """
    ALTER TABLE messages ADD COLUMN mention_ids TEXT NOT NULL DEFAULT '';
    ALTER TABLE messages ADD COLUMN reply_to_author_id BIGINT;
    ALTER TABLE messages ADD COLUMN mentions_everyone BOOLEAN NOT NULL DEFAULT false;
    CREATE TABLE forget_markers (
        channel_id BIGINT PRIMARY KEY,
        guild_id   BIGINT NOT NULL,
        after_id   BIGINT NOT NULL
    );
    CREATE INDEX forget_markers_guild ON forget_markers (guild_id);
    """,
    # v5: small named values the bot keeps between runs.
    """
    CREATE TABLE bot_state (
        name  TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # v6: remembered facts (memory/store.py) with their full-text index, and named context snapshots.
    """
    CREATE TABLE memories (
        id                BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        guild_id          BIGINT NOT NULL,
        channel_id        BIGINT NOT NULL,
        about_id          BIGINT,
        said_by_id        BIGINT NOT NULL,
        source_message_id BIGINT NOT NULL,
        fact              TEXT   NOT NULL,
        created_at        BIGINT NOT NULL,
        words             TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', fact)) STORED
    );
    CREATE INDEX memories_channel ON memories (channel_id, id);
    CREATE INDEX memories_about ON memories (guild_id, about_id, id);
    CREATE INDEX memories_said_by ON memories (guild_id, said_by_id);
    CREATE INDEX memories_source ON memories (source_message_id);
    CREATE INDEX memories_time ON memories (created_at);
    CREATE INDEX memories_words ON memories USING gin (words);
    CREATE TABLE context_snapshots (
        channel_id BIGINT NOT NULL,
        name       TEXT   NOT NULL,
        guild_id   BIGINT NOT NULL,
        saved_by   BIGINT NOT NULL,
        saved_at   BIGINT NOT NULL,
        history    JSON   NOT NULL, -- pydantic-ai's ModelMessagesTypeAdapter JSON
        PRIMARY KEY (channel_id, name)
    );
    CREATE INDEX context_snapshots_guild ON context_snapshots (guild_id);
    CREATE INDEX context_snapshots_time ON context_snapshots (saved_at);
    """,
    # v7: live conversations and the summaries of ended ones.
    """
    CREATE TABLE conversations (
        channel_id    BIGINT PRIMARY KEY,
        last_activity BIGINT NOT NULL,
        state         TEXT   NOT NULL
    );
    CREATE TABLE conversation_summaries (
        id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        channel_id BIGINT NOT NULL,
        ended_at   BIGINT NOT NULL,
        summary    TEXT   NOT NULL,
        first_id   BIGINT NOT NULL,
        last_id    BIGINT NOT NULL
    );
    CREATE INDEX conversation_summaries_channel ON conversation_summaries (channel_id, ended_at);
    CREATE INDEX conversation_summaries_time ON conversation_summaries (ended_at);
    """,
    # v8: the channels where an @mention opens a thread (/parley-admin threads), and the threads Parley opened.
    """
    CREATE TABLE thread_settings (
        channel_id BIGINT  PRIMARY KEY,
        guild_id   BIGINT  NOT NULL,
        threads    BOOLEAN NOT NULL,
        updated_at BIGINT  NOT NULL
    );
    CREATE INDEX thread_settings_guild ON thread_settings (guild_id);
    CREATE TABLE own_threads (
        thread_id BIGINT PRIMARY KEY,
        parent_id BIGINT NOT NULL,
        guild_id  BIGINT NOT NULL,
        opened_at BIGINT NOT NULL
    );
    CREATE INDEX own_threads_parent ON own_threads (parent_id);
    CREATE INDEX own_threads_guild ON own_threads (guild_id);
    """,
    # v9: what members shared with their messages: names, types, sizes and the text read from them (text files,
    # PDFs, transcripts), searchable beside the messages; a message's attachments go with it.
    """
    CREATE TABLE attachments (
        attachment_id BIGINT PRIMARY KEY,
        -- However a message goes (deleted, its channel or server deleted, pruned), what it shared goes with it.
        message_id    BIGINT NOT NULL REFERENCES messages (message_id) ON DELETE CASCADE,
        channel_id    BIGINT NOT NULL,
        filename      TEXT   NOT NULL,
        content_type  TEXT   NOT NULL,
        size          BIGINT NOT NULL,
        text          TEXT   NOT NULL DEFAULT '',
        -- archive.folded_words(filename), kept to rebuild `words` when the text is read later.
        name_words    TSVECTOR NOT NULL,
        -- name_words and archive.folded_words(text): what a search matches.
        words         TSVECTOR NOT NULL
    );
    CREATE INDEX attachments_message ON attachments (message_id);
    CREATE INDEX attachments_words ON attachments USING gin (words) WITH (gin_pending_list_limit = 256);
    """,
    # v10: per model (its price differs), the cached input tokens providers report, and the judge's calls
    # apart from answers (v3's `answers` counted both); older rows have model '' (unknown).
    """
    ALTER TABLE token_usage ADD COLUMN model TEXT NOT NULL DEFAULT '';
    ALTER TABLE token_usage ADD COLUMN cached_input_tokens BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE token_usage ADD COLUMN judge_calls BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE token_usage DROP CONSTRAINT token_usage_pkey;
    ALTER TABLE token_usage ADD PRIMARY KEY (day, guild_id, channel_id, member_id, model);
    CREATE INDEX token_usage_guild_day ON token_usage (guild_id, day);
    """,
    # v11: profiles (profiles/channels.py): each value a /parley-admin profile command set for a channel or, under the
    # server's id, for a server, with who set it and when. The channel modes move there.
    """
    CREATE TABLE profile_settings (
        scope_id BIGINT NOT NULL, -- a channel's id, or its server's for the server default
        field    TEXT   NOT NULL,
        guild_id BIGINT NOT NULL,
        value    TEXT   NOT NULL,
        set_by   BIGINT,          -- NULL for a mode set before v11, whose setter was not kept
        set_at   BIGINT NOT NULL,
        PRIMARY KEY (scope_id, field)
    );
    CREATE INDEX profile_settings_guild ON profile_settings (guild_id);
    INSERT INTO profile_settings (scope_id, field, guild_id, value, set_by, set_at)
        SELECT channel_id, 'mode', guild_id, mode, NULL, updated_at FROM channel_settings;
    DROP TABLE channel_settings;
    """,
    # v12: each message's lexemes carry its channel (`_channel_prefix`), the commonest words' apart, so a search
    # reads the posting lists of its words in that one channel, rather than every channel's matches ANDed with the
    # channel's whole time index.
    """
    DROP INDEX messages_words;
    UPDATE messages SET words = (
        SELECT coalesce(string_agg(
            ''''
                || CASE WHEN lexeme = ANY (CAST($words$"""
    + "{"
    + ",".join(sorted(_CHANNEL_FREE_WORDS))
    + "}"
    + """$words$ AS text[])) THEN '' ELSE to_hex(channel_id) || 'x' END
                || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || ''''
                || coalesce(':' || array_to_string(positions, ','), ''),
            ' '), '')::tsvector
        FROM unnest(words)
    );
    -- Postgres's default pending list (4 MB): a search reads all of it (about 2 ms when full), but the index
    -- takes pending entries in at about a third of the cost per entry of a 256 kB list.
    CREATE INDEX messages_words ON messages USING gin (words) WITH (gin_pending_list_limit = 4096);
    """,
    # v13: what each process keeps in memory from these tables (profiles, forget markers, thread settings, the
    # threads Parley opened) follows another process's change (archive/changes.py): a change notifies on
    # `parley_<table>` with the row's channel (or server) id, from the transaction that makes it, so the
    # notification goes out exactly when the change is committed.
    """
    CREATE FUNCTION parley_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify(
            'parley_' || TG_TABLE_NAME,
            (CASE TG_OP WHEN 'DELETE' THEN to_jsonb(OLD) ELSE to_jsonb(NEW) END) ->> TG_ARGV[0]
        );
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER profile_settings_changed AFTER INSERT OR UPDATE OR DELETE ON profile_settings
        FOR EACH ROW EXECUTE FUNCTION parley_notify_change('scope_id');
    CREATE TRIGGER forget_markers_changed AFTER INSERT OR UPDATE OR DELETE ON forget_markers
        FOR EACH ROW EXECUTE FUNCTION parley_notify_change('channel_id');
    CREATE TRIGGER thread_settings_changed AFTER INSERT OR UPDATE OR DELETE ON thread_settings
        FOR EACH ROW EXECUTE FUNCTION parley_notify_change('channel_id');
    CREATE TRIGGER own_threads_changed AFTER INSERT OR UPDATE OR DELETE ON own_threads
        FOR EACH ROW EXECUTE FUNCTION parley_notify_change('thread_id');
    """,
    # v14: how far each channel's recheck of its archived messages against Discord has got
    # (upkeep/reconciliation.py), so that it goes on where it stopped after a restart.
    """
    CREATE TABLE reconciliation (
        channel_id BIGINT PRIMARY KEY,
        guild_id   BIGINT NOT NULL,
        upto_id    BIGINT NOT NULL, -- the pass checks the archived messages older than this id
        reached_id BIGINT NOT NULL, -- it has checked those from this id up; 0 once it reached the oldest
        again_id   BIGINT           -- Parley was away again during the pass: another pass, below this id, follows
    );
    CREATE INDEX reconciliation_guild ON reconciliation (guild_id);
    """,
    # v15: each member's answers as a token bucket (archive/allowances.py), so every process spends from one
    # allowance: the answers left, when they were counted (ms), and whether this spell of refusals was told.
    """
    CREATE TABLE answer_allowances (
        guild_id   BIGINT           NOT NULL,
        member_id  BIGINT           NOT NULL,
        tokens     DOUBLE PRECISION NOT NULL,
        updated_at BIGINT           NOT NULL,
        warned     BOOLEAN          NOT NULL DEFAULT false,
        PRIMARY KEY (guild_id, member_id)
    );
    """,
    # v16: the members who opted out in a server (/parley privacy optout); every process keeps them in memory, so
    # a change notifies `parley_opt_outs` with the member's id, as v13's tables do.
    """
    CREATE TABLE opt_outs (
        guild_id     BIGINT NOT NULL,
        member_id    BIGINT NOT NULL,
        opted_out_at BIGINT NOT NULL,
        PRIMARY KEY (guild_id, member_id)
    );
    CREATE INDEX opt_outs_member ON opt_outs (member_id);
    CREATE TRIGGER opt_outs_changed AFTER INSERT OR UPDATE OR DELETE ON opt_outs
        FOR EACH ROW EXECUTE FUNCTION parley_notify_change('member_id');
    """,
    # v17: the servers' access lists (admission/access_lists.py): each channel, category, role or member a
    # /parley-admin access command allowed or blocked, with who did it and when; one entry per target. A change
    # notifies `parley_access_entries` with the server's id, as v13's tables do. A deleted channel keeps its entry
    # (the server's go with it): dropping the only allowed channel's would open every other.
    """
    CREATE TABLE access_entries (
        guild_id  BIGINT NOT NULL,
        target_id BIGINT NOT NULL,
        kind      TEXT   NOT NULL, -- channel, category, role or member
        listed    TEXT   NOT NULL, -- allow or block
        set_by    BIGINT NOT NULL,
        set_at    BIGINT NOT NULL,
        PRIMARY KEY (guild_id, target_id)
    );
    CREATE TRIGGER access_entries_changed AFTER INSERT OR UPDATE OR DELETE ON access_entries
        FOR EACH ROW EXECUTE FUNCTION parley_notify_change('guild_id');
    """,
    # v18: the messages from while Parley was away that one process took up to decide (answering/gap.py):
    # claimed here first, so processes sharing the archive never answer the same one twice.
    """
    CREATE TABLE message_claims (
        message_id BIGINT PRIMARY KEY,
        claimant   TEXT   NOT NULL, -- the process that took it up
        claimed_at BIGINT NOT NULL
    );
    """,
    # v19 (digest): each channel's digest (/parley-admin digest, upkeep/digests.py): its schedule, and the digest
    # period last taken up (archive/digests.py), claimed by one `UPDATE … WHERE last_period < …`, so processes
    # sharing the archive post each digest once.
    """
    CREATE TABLE digests (
        channel_id  BIGINT  PRIMARY KEY,
        guild_id    BIGINT  NOT NULL,
        every       TEXT    NOT NULL, -- daily or weekly
        hour        INTEGER NOT NULL, -- 0 to 23, in TIMEZONE
        weekday     INTEGER NOT NULL, -- 0 (Monday) to 6, for a weekly digest
        last_period BIGINT  NOT NULL, -- when the latest digest taken up was due, ms since the epoch
        claimant    TEXT    NOT NULL, -- the process that took it up ('' before any)
        set_by      BIGINT  NOT NULL,
        set_at      BIGINT  NOT NULL
    );
    CREATE INDEX digests_guild ON digests (guild_id);
    """,
    # v20 (remind): reminders and timed posts (archive/reminders.py): each posted at `due_at` by the process that
    # claims it; a one-off's claim sets `delivered_at`, a recurring one's moves `due_at` on, each a conditional
    # UPDATE, so of the processes that find it due one posts it. `claim` is the token of the claim that stood.
    """
    CREATE TABLE reminders (
        id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        guild_id     BIGINT  NOT NULL, -- 0: a direct message
        channel_id   BIGINT  NOT NULL,
        owner_id     BIGINT  NOT NULL,
        text         TEXT    NOT NULL,
        due_at       BIGINT  NOT NULL,
        every        TEXT    NOT NULL, -- '' once, else its recurrence (reminders/when.py)
        post_here    BOOLEAN NOT NULL, -- a timed post to the channel, pinging no one
        created_at   BIGINT  NOT NULL,
        delivered_at BIGINT,
        claim        TEXT
    );
    CREATE INDEX reminders_due ON reminders (due_at) WHERE delivered_at IS NULL;
    CREATE INDEX reminders_owner ON reminders (guild_id, owner_id);
    """,
    # v21 (knowledge): the knowledge base (archive/knowledge.py): each server's documents and their sections, with
    # the sections' folded words (archive.folded_words, heading weighted B) as 'simple' lexemes.
    """
    CREATE TABLE knowledge_documents (
        id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        guild_id   BIGINT NOT NULL,
        source     TEXT   NOT NULL, -- file:<name> or pin:<channel_id>:<message_id>, unique in the server
        title      TEXT   NOT NULL,
        channel_id BIGINT,          -- NULL: server-wide; else only that channel's readers find it
        added_by   BIGINT NOT NULL,
        added_at   BIGINT NOT NULL,
        UNIQUE (guild_id, source)
    );
    CREATE TABLE knowledge_sections (
        id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        document_id BIGINT   NOT NULL,
        position    INTEGER  NOT NULL,
        heading     TEXT     NOT NULL,
        text        TEXT     NOT NULL,
        words       TSVECTOR NOT NULL
    );
    CREATE INDEX knowledge_sections_document ON knowledge_sections (document_id, position);
    CREATE INDEX knowledge_sections_words ON knowledge_sections USING gin (words);
    """,
    # v22 (vectors): the knowledge sections waiting for an embedding, and what drops a deleted section's queued text
    # and vector (archive/vectors.py).
    POSTGRES_QUEUE_TABLE,
    # v23 (pins): the channels whose pinned messages are taken into the knowledge base (edge/pins.py), with who
    # turned it on and when. A row per channel opted in; turning it off deletes the row.
    """
    CREATE TABLE pin_channels (
        channel_id BIGINT PRIMARY KEY,
        guild_id   BIGINT NOT NULL,
        set_by     BIGINT NOT NULL,
        set_at     BIGINT NOT NULL
    );
    CREATE INDEX pin_channels_guild ON pin_channels (guild_id);
    """,
    # v24 (erasure): the members who erased their data in a server (/parley privacy erase): what they wrote up to
    # `upto_id` is never archived again. Every process keeps them in memory with the opt-outs, so a change notifies
    # `parley_erasures` with the member's id, as v16's opt-outs do.
    """
    CREATE TABLE erasures (
        guild_id  BIGINT NOT NULL,
        member_id BIGINT NOT NULL,
        upto_id   BIGINT NOT NULL,
        erased_at BIGINT NOT NULL,
        PRIMARY KEY (guild_id, member_id)
    );
    CREATE INDEX erasures_member ON erasures (member_id);
    CREATE TRIGGER erasures_changed AFTER INSERT OR UPDATE OR DELETE ON erasures
        FOR EACH ROW EXECUTE FUNCTION parley_notify_change('member_id');
    """,
    # v25 (privacyreads): who wrote the message each decision quotes, so an erasure finds the excerpts of questions
    # asked by command (/ask), which are no archived message; 0 for no one (a placeholder) and rows from before.
    "ALTER TABLE decisions ADD COLUMN author_id BIGINT NOT NULL DEFAULT 0;",
    # v26 (picker): the model each member chose for the answers to them in a server (`/parley model`), among
    # MEMBER_MODELS; the member's data, exported and erased with it, and the server's go when Parley leaves it.
    """
    CREATE TABLE member_models (
        guild_id  BIGINT NOT NULL,
        member_id BIGINT NOT NULL,
        model     TEXT   NOT NULL,
        chosen_at BIGINT NOT NULL,
        PRIMARY KEY (guild_id, member_id)
    );
    """,
    # v27 (supportfeedback): the askers' feedback on the support desk's answers (archive/support_feedback.py): a row
    # per question, offered when its answer's Solved and Not helpful buttons are posted, its verdict set by the
    # asker's press. The asker's rows go with their erasure; the server's with it.
    """
    CREATE TABLE support_feedback (
        question_id BIGINT PRIMARY KEY,
        guild_id    BIGINT NOT NULL,
        channel_id  BIGINT NOT NULL,
        asker_id    BIGINT NOT NULL,
        post_id     BIGINT NOT NULL,
        verdict     TEXT   NOT NULL,
        offered_at  BIGINT NOT NULL,
        decided_at  BIGINT
    );
    CREATE INDEX support_feedback_guild_time ON support_feedback (guild_id, offered_at);
    CREATE INDEX support_feedback_asker ON support_feedback (guild_id, asker_id);
    CREATE INDEX support_feedback_channel ON support_feedback (channel_id);
    """,
    # v28 (images): the images made a day for each member in each channel with each model, beside their tokens
    # (tools/images.py): what IMAGES_PER_MEMBER_PER_DAY and IMAGES_PER_SERVER_PER_DAY count, and the usage report.
    "ALTER TABLE token_usage ADD COLUMN images BIGINT NOT NULL DEFAULT 0;",
    # v29 (prefix): each process keeps whether a server has documents (knowledge/base.py); a document added or
    # removed anywhere notifies `parley_knowledge_documents` with its server's id, once a transaction per server.
    """
    CREATE TRIGGER knowledge_documents_changed AFTER INSERT OR DELETE ON knowledge_documents
        FOR EACH ROW EXECUTE FUNCTION parley_notify_change('guild_id');
    """,
    # v30 (moderation): moderation (archive/moderation.py, moderation/): the cases (a reported or flagged message under
    # review, one per message; its text kept while it is open), the reports in them (one per member and message),
    # every action taken on a member's say, each server's settings, its watched channels and its screening tokens.
    """
    CREATE TABLE moderation_cases (
        id              BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        guild_id        BIGINT NOT NULL,
        channel_id      BIGINT NOT NULL,
        message_id      BIGINT NOT NULL UNIQUE,
        author_id       BIGINT NOT NULL, -- the member reported
        content         TEXT    NOT NULL, -- '' once closed
        source          TEXT    NOT NULL, -- 'report' or 'watch'
        opened_at       BIGINT NOT NULL,
        rule            TEXT    NOT NULL DEFAULT '',
        confidence      DOUBLE PRECISION    NOT NULL DEFAULT 0,
        summary         TEXT    NOT NULL DEFAULT '',
        card_channel_id BIGINT,
        card_message_id BIGINT,
        closed_at       BIGINT,
        closed_by       BIGINT
    );
    CREATE INDEX moderation_cases_guild ON moderation_cases (guild_id, opened_at);
    CREATE INDEX moderation_cases_author ON moderation_cases (guild_id, author_id);
    CREATE TABLE moderation_reports (
        message_id  BIGINT NOT NULL,
        reporter_id BIGINT NOT NULL,
        guild_id    BIGINT NOT NULL,
        reason      TEXT    NOT NULL,
        reported_at BIGINT NOT NULL,
        PRIMARY KEY (message_id, reporter_id)
    );
    CREATE INDEX moderation_reports_reporter ON moderation_reports (guild_id, reporter_id, reported_at);
    CREATE TABLE moderation_actions (
        id                BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        guild_id          BIGINT NOT NULL,
        channel_id        BIGINT NOT NULL,
        action            TEXT    NOT NULL,
        actor_id          BIGINT NOT NULL,
        requested_by      BIGINT,
        target_member_id  BIGINT,
        target_message_id BIGINT,
        detail            TEXT    NOT NULL,
        case_id           BIGINT,
        at                BIGINT NOT NULL
    );
    CREATE INDEX moderation_actions_guild ON moderation_actions (guild_id, at);
    CREATE TABLE moderation_settings (
        guild_id    BIGINT PRIMARY KEY,
        channel_id  BIGINT, -- where case cards go; NULL: reports are not taken
        rules       TEXT    NOT NULL, -- the rules' text set by command
        rules_document_id BIGINT, -- or the knowledge base's document marked as the rules
        watch_words TEXT    NOT NULL, -- one a line
        set_by      BIGINT NOT NULL,
        set_at      BIGINT NOT NULL
    );
    CREATE TABLE moderation_watch (
        channel_id BIGINT PRIMARY KEY,
        guild_id   BIGINT NOT NULL,
        set_by     BIGINT NOT NULL,
        set_at     BIGINT NOT NULL
    );
    CREATE INDEX moderation_watch_guild ON moderation_watch (guild_id);
    CREATE TABLE screening_usage (
        guild_id BIGINT NOT NULL,
        day      BIGINT NOT NULL,
        tokens   BIGINT NOT NULL,
        PRIMARY KEY (guild_id, day)
    );
    """,
    # v31 (supportdesk): the channels in support mode (/parley-admin support, helpdesk/): a row per channel turned on,
    # with who did it and when; turning it off deletes the row. And the forum posts waiting for their hand-off to the
    # staff role, claimed by one conditional update so one process hands each off, once, across restarts.
    """
    CREATE TABLE support_channels (
        channel_id BIGINT  PRIMARY KEY,
        guild_id   BIGINT NOT NULL,
        set_by     BIGINT NOT NULL,
        set_at     BIGINT NOT NULL
    );
    CREATE INDEX support_channels_guild ON support_channels (guild_id);
    CREATE TABLE support_handoffs (
        message_id BIGINT  PRIMARY KEY, -- a forum post's first message, whose id is its thread's
        guild_id   BIGINT NOT NULL,
        asker_id   BIGINT NOT NULL,
        due_at     BIGINT NOT NULL,
        claimant   TEXT              -- the process that handed it off; NULL while it waits
    );
    CREATE INDEX support_handoffs_due ON support_handoffs (due_at) WHERE claimant IS NULL;
    """,
    # v32 (schedule): a reminder may be a scheduled prompt (`/parley-admin schedule`, reminders/scheduler.py): its
    # text is asked of the model at each time, on the reminders' claims, and the answer posted.
    "ALTER TABLE reminders ADD COLUMN prompt BOOLEAN NOT NULL DEFAULT FALSE;",
)

# The writes of messages and their attachments are Postgres's own (`_OWN_WRITES`, $N placeholders); the others'
# statements (archive/bot_writes.py, the table mixins') are numbered by `_statement`. Each is run with executemany
# over a run of ops.
# A run of adds is copied (binary COPY) into the writer's session table `added_messages`, then moved by one
# statement: a statement per row is about 5x slower, and a statement of column arrays costs asyncpg an element check
# per value (a quarter of the writer's time). The words come as tsvector text (`_lexemes`): parsing that costs the
# server a third of what to_tsvector costs. The database puts in the channel's prefix where `_lexemes` marks it, so
# the writer sends 40% fewer bytes.
_CHANNEL_LEXEMES = "replace({}, '''_', '''' || to_hex(channel_id) || 'x')::tsvector"
# Rows of the runs of adds of the transaction (one batch), told apart by `run`; emptied when it commits.
_ADDED_MESSAGES = """
CREATE TEMPORARY TABLE IF NOT EXISTS added_messages (
    run BIGINT NOT NULL, message_id BIGINT, guild_id BIGINT, channel_id BIGINT, author_id BIGINT, author_name TEXT,
    content TEXT, created_at BIGINT, edited_at BIGINT, is_bot BOOLEAN, reply_to_message_id BIGINT, mention_ids TEXT,
    reply_to_author_id BIGINT, mentions_everyone BOOLEAN, lexemes TEXT
) ON COMMIT DELETE ROWS
"""
_ADD = Write(
    "add",
    (
        "WITH added AS (SELECT * FROM added_messages WHERE run = $1),"
        # Every channel that has had a message, in the same statement.
        " new_channels AS (INSERT INTO channels (channel_id, guild_id)"
        " SELECT DISTINCT channel_id, guild_id FROM added ON CONFLICT (channel_id) DO NOTHING)"
        f" INSERT INTO messages ({_MESSAGE_COLUMNS}, words)"
        f" SELECT {_MESSAGE_COLUMNS}, {_CHANNEL_LEXEMES.format('lexemes')} FROM added"
        f" WHERE NOT {withheld('added.guild_id', 'added.author_id', 'added.message_id')}"
        " ON CONFLICT (message_id) DO UPDATE SET author_id = excluded.author_id,"
        " author_name = excluded.author_name, content = excluded.content, words = excluded.words,"
        " created_at = excluded.created_at, edited_at = excluded.edited_at,"
        " is_bot = excluded.is_bot, reply_to_message_id = excluded.reply_to_message_id,"
        " mention_ids = excluded.mention_ids, reply_to_author_id = excluded.reply_to_author_id,"
        " mentions_everyone = excluded.mentions_everyone",
    ),
)
# Adds whose words are made ready between two turns of the event loop: a batch of 1,000 at once held it for about
# 10 ms, longer on a loaded machine.
_PREPARED_AT_ONCE = 250
_EDIT = Write(
    "edit",
    (
        "UPDATE messages SET content = $2, edited_at = $3,"
        f" words = {_CHANNEL_LEXEMES.format('$4')} WHERE message_id = $1"
        f" AND NOT {withheld('messages.guild_id', 'messages.author_id', 'messages.message_id')}",
    ),
)
_DELETE = Write(
    "delete",
    (
        "DELETE FROM conversation_summaries AS s USING messages AS m WHERE m.message_id = $1"
        " AND m.channel_id = s.channel_id AND m.message_id BETWEEN s.first_id AND s.last_id",
        "DELETE FROM messages WHERE message_id = $1",
        "DELETE FROM decisions WHERE message_id = $1",
        "DELETE FROM support_feedback WHERE question_id = $1",
        "DELETE FROM memories WHERE source_message_id = $1",
    ),
)
# A re-added message (catch-up) keeps the text already read from its attachments (Discord never renames a file, so
# the words stay). Only for an archived message: one deleted while the write was queued has nothing to attach to.
_ADD_ATTACHMENT = Write(
    "add_attachment",
    (
        "INSERT INTO attachments (attachment_id, message_id, channel_id, filename, content_type, size, name_words,"
        " words) SELECT $1::bigint, message_id, $3::bigint, $4::text, $5::text, $6::bigint,"
        " to_tsvector('simple', $7::text), to_tsvector('simple', $7::text) FROM messages AS m WHERE m.message_id = $2"
        f" AND NOT {withheld('m.guild_id', 'm.author_id', 'm.message_id')}"
        " ON CONFLICT (attachment_id) DO UPDATE SET filename = excluded.filename,"
        " content_type = excluded.content_type, size = excluded.size",
    ),
)
_ATTACHMENT_TEXT = Write(
    "set_attachment_text",
    (
        "UPDATE attachments SET text = $2, words = name_words || to_tsvector('simple', $3) WHERE attachment_id = $1"
        " AND NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.message_id = attachments.message_id"
        f" AND {withheld('m.guild_id', 'm.author_id', 'm.message_id')})",
    ),
)
# Who shared an attachment and the bytes of file text kept on its day (`archive.file_text`) in its channel and from
# them; a day's files are a range of the primary key. octet_length reads a stored text's size from its header. The
# notes left in place of text over a budget count nothing.
_FILE_TEXT_USAGE_SQL = """
SELECT a.channel_id, m.author_id,
    (SELECT coalesce(sum(octet_length(c.text)), 0) FROM attachments AS c
        WHERE c.attachment_id BETWEEN $2 AND $3 AND c.channel_id = a.channel_id
            AND c.attachment_id != a.attachment_id AND c.text NOT IN ($4, $5)),
    (SELECT coalesce(sum(octet_length(o.text)), 0) FROM attachments AS o
        JOIN messages AS n ON n.message_id = o.message_id
        WHERE o.attachment_id BETWEEN $2 AND $3 AND n.author_id = m.author_id
            AND o.attachment_id != a.attachment_id AND o.text NOT IN ($4, $5))
FROM attachments AS a JOIN messages AS m ON m.message_id = a.message_id
WHERE a.attachment_id = $1
"""
_KEEP_ATTACHMENTS = Write(
    "keep_attachments",
    (
        "DELETE FROM attachments WHERE message_id = $1"
        " AND attachment_id NOT IN (SELECT value::bigint FROM jsonb_array_elements_text($2::text::jsonb))",
    ),
)

# The writes whose last parameter is the folded words of the text at this position in their params.
_INDEXED = {_ADD_ATTACHMENT: 3, _ATTACHMENT_TEXT: 1}
# Where add() and edit() put the message's text in their params.
_ADD_TEXT_FIELD, _EDIT_TEXT_FIELD = 5, 1
_OWN_WRITES = frozenset({_ADD, _EDIT, _DELETE, _ADD_ATTACHMENT, _ATTACHMENT_TEXT, _KEEP_ATTACHMENTS})

# ts_rank over the channel's newest candidates, best first, ties newest first.
_SEARCH_SQL = f"""
SELECT {_MESSAGE_COLUMNS} FROM (
    SELECT {_MESSAGE_COLUMNS}, ts_rank(words, query) AS score
    FROM messages AS m, CAST(:match AS tsquery) AS query
    WHERE channel_id = :channel AND words @@ query AND created_at >= :since AND {NOT_OPTED_OUT}
    -- The channel's time index gives this order, so a very common word is read newest first off it.
    ORDER BY created_at DESC, message_id DESC
    LIMIT {SEARCH_CANDIDATES}
) AS candidates
ORDER BY score DESC, created_at DESC, message_id DESC
LIMIT :limit
"""
# The channel's newest matching attachments ranked, as for messages; the excerpt of the matching text travels as
# the attachment's text, so the model sees why it matched.
_SEARCH_ATTACHMENTS_SQL = f"""
SELECT {", ".join("m." + name for name in _MESSAGE_COLUMNS.split(", "))},
    a.attachment_id, a.filename, a.content_type, a.size,
    ts_headline('simple', a.text, query, 'StartSel="", StopSel="", MaxWords=40, MinWords=20')
FROM (
    SELECT attachment_id, message_id, filename, content_type, size, text, ts_rank(words, query) AS score
    FROM attachments, to_tsquery('simple', :match) AS query
    WHERE channel_id = :channel AND words @@ query
    ORDER BY attachment_id DESC
    LIMIT {SEARCH_CANDIDATES}
) AS a
    JOIN messages AS m ON m.message_id = a.message_id,
    to_tsquery('simple', :match) AS query
WHERE m.created_at >= :since AND {NOT_OPTED_OUT}
ORDER BY a.score DESC, m.created_at DESC
LIMIT :limit
"""
# SQLite-style placeholders in other stores' statements: ?, ?N and :name (but not a :: cast).
POSTGRES_MESSAGES = MessageDialect(
    match=lambda query, op: tsquery_expression(query, op),
    # A message's lexemes carry its channel's prefix (`_lexemes`), so its words are looked up as the channel's.
    channel_match=lambda channel_id, match: _channel_tsquery(channel_id, match),
    search_all_sql=_SEARCH_SQL,
    search_window_sql=_SEARCH_SQL,
    search_attachments_sql=_SEARCH_ATTACHMENTS_SQL,
    attachments_sql="SELECT message_id, attachment_id, filename, content_type, size, text FROM attachments"
    " WHERE message_id = ANY(CAST(:ids AS BIGINT[])) ORDER BY attachment_id",
    ids=list,
)
_PLACEHOLDER = re.compile(r"\?(\d*)|(?<![:\w]):([A-Za-z_]\w*)")


def tsquery_expression(query: str, op: str) -> str | None:
    """A ``to_tsquery`` text for free text `query`: its folded words joined by `op` (AND or OR); None without words.

    The words are letters and digits only, so nothing in `query` can be tsquery syntax.
    """
    words = list(dict.fromkeys(folded_words(" ".join(search_words(query))).split()))
    return f" {'&' if op == 'AND' else '|'} ".join(words) or None


@functools.lru_cache(maxsize=4096)
def _channel_prefix(channel_id: int) -> str:
    """What starts each of the channel's lexemes: its id in hex (as the database's to_hex writes it) and 'x'."""
    return f"{channel_id & 0xFFFF_FFFF_FFFF_FFFF:x}x"


def _lexemes(text: str) -> str:
    """tsvector text of `text`'s folded words at their positions (as to_tsvector counts), each lexeme marked by '_'
    (never in a folded word) where the channel's prefix goes (`_CHANNEL_LEXEMES`), but for `_CHANNEL_FREE_WORDS`.

    Folded words are letters and digits only, so none needs escaping. Words too long for a lexeme with any
    channel's prefix are left out, as to_tsvector leaves out words too long for a lexeme; the database merges a
    word's positions and caps them as to_tsvector does.
    """
    folded = folded_words(text)
    words = folded.split()
    if len(folded) > _MAX_WORD_BYTES // 4:  # else no word can be too long, even in UTF-8
        words = [word for word in words if len(word.encode()) <= _MAX_WORD_BYTES]
    positions: Iterable[str] = _POSITIONS
    if len(words) > len(_POSITIONS):
        positions = itertools.chain(_POSITIONS, itertools.repeat(_POSITIONS[-1]))
    return "".join(
        [
            (" '" if word in _CHANNEL_FREE_WORDS else " '_") + word + at
            for word, at in zip(words, positions, strict=False)
        ]
    )


def _channel_tsquery(channel_id: int, expression: str) -> str | None:
    """`expression` (`tsquery_expression`'s) as tsquery text of the channel's lexemes; None if no word can be one."""
    prefix = _channel_prefix(channel_id)
    op = " | " if " | " in expression else " & "
    words = [word for word in expression.split(op) if len(word.encode()) <= _MAX_WORD_BYTES]
    return op.join(f"'{word}'" if word in _CHANNEL_FREE_WORDS else f"'{prefix}{word}'" for word in words) or None


class PostgresArchive(
    MessageReads,
    BotReads,
    BatchWriter[asyncpg.Connection],
    StoreTables,
    MemberTables,
    PinChannelRows,
    MemberModelRows,
    SupportChannelRows,
    DigestTables,
    PostgresAllowances,
    ReminderTables,
    ModerationTables,
    KnowledgeTables,
    PostgresVectorTables,
    FeedbackRows,
):
    """Message archive in a Postgres database that several processes may share.

    Writes only enqueue; this process's writer task commits them in order, one transaction per batch, at
    least every ``flush_interval`` seconds. Reads see committed data only; call ``flush()`` to read your
    own writes.
    """

    writes = write_kinds(
        add=_ADD,
        add_attachment=_ADD_ATTACHMENT,
        edit=_EDIT,
        delete=_DELETE,
        attachment_text=_ATTACHMENT_TEXT,
        keep_attachments=_KEEP_ATTACHMENTS,
    )

    dialect = "postgres"

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        retention_days: int,
        flush_interval: float,
        batch_size: int,
        prune_interval: float,
        file_text_budget: FileTextBudget | None,
    ) -> None:
        self._pool = pool
        self._connections = (pool.close,)
        self._writer_connection = functools.partial(_writer_connection, pool)
        self._start_queue(
            retention_days=retention_days,
            batch_size=batch_size,
            flush_interval=flush_interval,
            prune_interval=prune_interval,
            file_text_budget=file_text_budget,
        )
        self._add_runs = itertools.count()

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        retention_days: int = 90,
        flush_interval: float = 0.5,
        batch_size: int = 1000,
        prune_interval: float = 3600.0,
        file_text_budget: FileTextBudget | None = None,
        claim: ArchiveClaim | None = None,
    ) -> PostgresArchive:
        """Connect, migrate the schema (one process at a time), then start the writer.

        ``claim``, the process's shard locks (`archive.exclusive`), is released when the archive closes; if
        opening fails, it is the caller's.

        Raises:
            DatabaseUrlError: the server cannot be reached, or refuses the URL's user, password or database.
        """
        if retention_days < 0 or flush_interval <= 0 or batch_size < 1 or prune_interval <= 0:
            raise ValueError("retention_days must be >= 0; intervals and batch_size positive")
        pool = await _connect(url)
        try:
            await _migrate(pool)
        except BaseException:
            await pool.close()
            raise
        archive = cls(
            pool,
            retention_days=retention_days,
            flush_interval=flush_interval,
            batch_size=batch_size,
            prune_interval=prune_interval,
            file_text_budget=file_text_budget,
        )
        archive._claim = claim
        archive._start_writer()
        return archive

    # The table mixins' reads and writes (archive/message_reads.py, bot_reads.py, stores.py, ...).

    recall_sql = _RECALL_MEMORIES_SQL
    knowledge_dialect = POSTGRES_KNOWLEDGE
    message_dialect = POSTGRES_MESSAGES
    file_text_usage_sql = _FILE_TEXT_USAGE_SQL
    # From the table's identity sequence: unique across processes.
    next_id_sql = "SELECT nextval(pg_get_serial_sequence(?, 'id'))"

    async def read(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query (SQLite-style placeholders: ``?``, ``?N`` or ``:name``): committed data only."""
        statement, names = _numbered(sql)
        values = [params[name] for name in names] if isinstance(params, dict) else list(params)
        return await self._fetch(statement, *values)

    async def _fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        async with self._pool.acquire() as connection:
            return [tuple(record) for record in await connection.fetch(sql, *args)]

    # Writer side (archive/writer.py): what Postgres runs on its writer connection.

    async def _prepared_rows(self, kind: Write, params: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """With their words folded: here rather than on the caller's stack, as it is the costliest part of a write."""
        if kind is _ADD:
            return await _added_rows(next(self._add_runs), params)
        if kind is _EDIT:
            return [(*p, _lexemes(p[_EDIT_TEXT_FIELD])) for p in params]
        if kind in _INDEXED:
            return [(*p, folded_words(p[_INDEXED[kind]])) for p in params]
        return params

    async def _lock_claims(self, connection: asyncpg.Connection, runs: list[Run]) -> None:
        """Hold each scope's count-claim lock until the transaction ends (`Write.claim_scope`): another process's
        claim in the scope waits for this one's commit, then counts what it stored. All of a batch's, first and in
        one order, so two writers' batches never wait on each other in a circle."""
        for scope in sorted(self._claim_scopes(runs)):
            await connection.execute("SELECT pg_advisory_xact_lock($1, $2)", _CLAIM_LOCK_SPACE, scope % 2**31)

    async def _execute_run(self, connection: asyncpg.Connection, kind: Write, params: list[tuple[Any, ...]]) -> None:
        if kind is _ADD:
            await connection.copy_records_to_table("added_messages", records=params)
            await connection.execute(_ADD.statements[0], params[0][0])
            return
        for statement in kind.statements:
            await connection.executemany(_statement(kind, statement), params)

    async def _delete_older_than(self, connection: asyncpg.Connection, cutoff_ms: int) -> int:
        for table, column in (
            ("decisions", "decided_at"),
            ("support_feedback", "offered_at"),
            ("message_claims", "claimed_at"),
            # A one-off claimed but never deleted: its process stopped between the claim and the post.
            ("reminders", "delivered_at"),
            ("memories", "created_at"),
            ("context_snapshots", "saved_at"),
            ("conversation_summaries", "ended_at"),
            ("conversations", "last_activity"),
        ):
            await connection.execute(f"DELETE FROM {table} WHERE {column} < $1", cutoff_ms)
        # A day is kept while any of it is inside the retention.
        await connection.execute("DELETE FROM token_usage WHERE day < $1", cutoff_ms // _MS_PER_DAY)
        # A member's bucket untouched that long is long full again, the same as no row.
        await connection.execute("DELETE FROM answer_allowances WHERE updated_at < $1", cutoff_ms)
        status: str = await connection.execute("DELETE FROM messages WHERE created_at < $1", cutoff_ms)
        return int(status.split()[-1])

    def _claim_scopes(self, runs: list[Run]) -> set[int]:
        """The scopes the batch's count claims claim in (`Write.claim_scope`): the servers of its reminders and
        knowledge documents, and, under file text budgets, the days of its files (a member's budget spans channels,
        so one lock per day serialises every process's files of that day)."""
        scopes: set[int] = set()
        for kind, params in runs:
            if kind.claim_scope is not None:
                scopes.update(kind.claim_scope(p) for p in params)
            elif kind is _ATTACHMENT_TEXT and self._file_texts.budget is not None:
                scopes.update(day_of(p[0])[0] for p in params)
        return scopes


@contextlib.asynccontextmanager
async def _writer_connection(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """The writer's connection, with the session table its runs of adds are copied into."""
    async with pool.acquire() as connection:
        await connection.execute(_ADDED_MESSAGES)
        yield connection


async def _connect(url: str) -> asyncpg.Pool:
    where = describe_database_url(url)
    try:
        pool = await asyncpg.create_pool(
            url,
            min_size=1,
            max_size=4,
            timeout=_CONNECT_TIMEOUT,
            # asyncpg prepares every statement, and after five runs Postgres may keep one generic plan for it: for
            # a search that is ANDing the channel's whole time index into every word's matches (10x slower).
            server_settings={"plan_cache_mode": "force_custom_plan"},
        )
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise DatabaseUrlError(f"DATABASE_URL names {where}, which cannot be reached: {reason}") from None
    return pool


async def _migrate(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as connection, connection.transaction():
        # Two processes starting at once must not both create the tables.
        await connection.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        version = await connection.fetchval("SELECT max(version) FROM schema_version") or 0
        if version > len(MIGRATIONS):
            raise RuntimeError(
                f"the database has schema version {version}; this code only knows up to {len(MIGRATIONS)}"
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            await connection.execute(MIGRATIONS[number - 1])
            await connection.execute("INSERT INTO schema_version (version) VALUES ($1)", number)
    if version < len(MIGRATIONS):
        # One line for the whole run, once it has committed: a first start applies every migration, which is
        # not news line by line.
        logger.info("history: migrated the Postgres archive from schema version %d to %d", version, len(MIGRATIONS))


async def _added_rows(run: int, params: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The `added_messages` rows of a run of adds: the run's number, the message, its lexemes."""
    # One statement may not change a row twice: of a message added again in the run, its last version.
    latest = list({p[0]: p for p in params}.values())
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(latest), _PREPARED_AT_ONCE):
        if start:
            await asyncio.sleep(0)
        rows += [(run, *p, _lexemes(p[_ADD_TEXT_FIELD])) for p in latest[start : start + _PREPARED_AT_ONCE]]
    return rows


def _statement(kind: Write, statement: str) -> str:
    """The Postgres text of one of `kind`'s statements (the shared ones are written with SQLite placeholders)."""
    if kind in _OWN_WRITES:
        return statement
    if kind.row is not None:
        statement = statement.replace("{rows}", kind.row)
    numbered, names = _numbered(statement)
    if names:
        raise ValueError(f"{kind.name}: queued writes take positional parameters")
    return numbered


@functools.cache
def _numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with ``?``, ``?N`` and ``:name`` placeholders as ``$N``, and the names in their numbering order."""
    names: list[str] = []
    position = 0

    def number(match: re.Match[str]) -> str:
        nonlocal position
        explicit, name = match.groups()
        if name is not None:
            if name not in names:
                names.append(name)
            return f"${names.index(name) + 1}"
        if explicit:
            return f"${explicit}"
        position += 1
        return f"${position}"

    return _PLACEHOLDER.sub(number, sql), tuple(names)
