"""SQLite archive of channel messages: full-text search, recent history and stats.

The archive is written by a single background task that drains an in-memory
queue in batches, so the Discord event loop only ever appends to a deque.
Reads go through a second, read-only connection; with WAL they run beside the
writer and see exactly what has been committed.

Times are stored as integer unix milliseconds (UTC): 8-byte integers keep the
rows and the (channel_id, created_at) index small, make range scans and
retention pruning plain integer comparisons, and turn "hour of day" into
arithmetic instead of date parsing.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import aiosqlite

from archive import (
    ArchivedAttachment,
    ArchivedMessage,
    ArchiveWriteFailed,
    ChannelStats,
    ConversationSummary,
    StoredConversation,
    StoredDecision,
    TokenUsage,
    TopAuthor,
    search_words,
)
from archive import Write as _Write
from archive.bot_reads import BotReads
from archive.bot_writes import write_kinds
from archive.claim import ArchiveClaim
from archive.digests import DigestTables
from archive.file_text import FileTextBudget
from archive.knowledge import SQLITE_KNOWLEDGE, KnowledgeTables
from archive.member_models import MemberModelRows
from archive.members import NOT_OPTED_OUT, MemberTables, withheld
from archive.message_reads import MessageDialect, MessageReads
from archive.moderation import ModerationTables
from archive.pin_channels import PinChannelRows
from archive.reminders import ReminderTables
from archive.rows import MESSAGE_COLUMNS as _MESSAGE_COLUMNS
from archive.sqlite_url import sqlite_path_from_url
from archive.stores import MEMORY_COLUMNS, MEMORY_SCOPE, RECALL_CANDIDATES, StoreTables
from archive.support_channels import SupportChannelRows
from archive.support_feedback import FeedbackRows
from archive.vectors import SQLITE_QUEUE_TABLE, SQLiteVectorTables, load_sqlite_vec, register_sqlite_vec
from archive.writer import BatchWriter

__all__ = [
    "MIGRATIONS",
    "ArchiveWriteFailed",
    "ArchivedAttachment",
    "ArchivedMessage",
    "ChannelStats",
    "ConversationSummary",
    "SQLiteArchive",
    "StoredConversation",
    "StoredDecision",
    "TokenUsage",
    "TopAuthor",
    "Write",
    "match_expression",
    "sqlite_path_from_url",
]

logger = logging.getLogger(__name__)

_MS_PER_HOUR = 3_600_000
_MS_PER_DAY = 24 * _MS_PER_HOUR
# https://discord.com/developers/docs/reference#snowflakes

# Host parameters per statement: 999 is the lowest limit any SQLite build has had.
_MAX_VARIABLES = 999

_SEQ_BITS = 40
_SEQ_MASK = (1 << _SEQ_BITS) - 1
# Where add() puts the search key in an add op's params.
_SEARCH_KEY_FIELD = 13

# Ordered schema migrations; entry N-1 takes a file from user_version N-1 to N.
# Append new scripts, never edit shipped ones.
MIGRATIONS: tuple[str, ...] = (
    # v1: the message archive with its full-text index.
    """
    CREATE TABLE messages (
        message_id          INTEGER PRIMARY KEY,
        guild_id            INTEGER NOT NULL,
        channel_id          INTEGER NOT NULL,
        author_id           INTEGER NOT NULL,
        author_name         TEXT    NOT NULL,
        content             TEXT    NOT NULL,
        created_at          INTEGER NOT NULL,
        edited_at           INTEGER,
        is_bot              INTEGER NOT NULL,
        reply_to_message_id INTEGER,
        -- (channel slot << 40) | arrival sequence in the channel; the FTS rowid.
        search_key          INTEGER NOT NULL
    );
    -- search_key and author_id ride along so a search window's lowest key and
    -- the per-hour and per-author counts come from the index alone.
    CREATE INDEX messages_channel_time ON messages (channel_id, created_at, search_key, author_id);
    CREATE UNIQUE INDEX messages_search_key ON messages (search_key);

    -- Every channel that has had a message, with the slot numbering its keys.
    -- Rows stay after their messages go, so a slot is never handed out twice.
    CREATE TABLE channels (
        slot       INTEGER PRIMARY KEY,
        channel_id INTEGER NOT NULL UNIQUE,
        guild_id   INTEGER NOT NULL
    );

    -- Keyed by search_key rather than message_id: a channel's entries are one
    -- rowid range, so a search seeks straight to it instead of intersecting a
    -- per-channel term (whose whole posting list bm25 would scan for its IDF).
    CREATE VIRTUAL TABLE messages_fts USING fts5 (
        content,
        content = 'messages', content_rowid = 'search_key',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER messages_insert AFTER INSERT ON messages BEGIN
        INSERT OR IGNORE INTO channels (slot, channel_id, guild_id)
        VALUES (new.search_key >> 40, new.channel_id, new.guild_id);
        INSERT INTO messages_fts (rowid, content) VALUES (new.search_key, new.content);
    END;
    CREATE TRIGGER messages_delete AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content)
        VALUES ('delete', old.search_key, old.content);
    END;
    -- Re-adding an unchanged message (upsert) must not churn the index.
    CREATE TRIGGER messages_update AFTER UPDATE OF content ON messages
    WHEN old.content IS NOT new.content BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content)
        VALUES ('delete', old.search_key, old.content);
        INSERT INTO messages_fts (rowid, content) VALUES (new.search_key, new.content);
    END;
    """,
    # v2: per-channel settings and the reply-decision log.
    """
    CREATE TABLE channel_settings (
        channel_id INTEGER PRIMARY KEY,
        guild_id   INTEGER NOT NULL,
        mode       TEXT    NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX channel_settings_guild ON channel_settings (guild_id);

    CREATE TABLE decisions (
        id          INTEGER PRIMARY KEY,
        channel_id  INTEGER NOT NULL,
        message_id  INTEGER NOT NULL,
        author_name TEXT    NOT NULL,
        excerpt     TEXT    NOT NULL,
        responded   INTEGER NOT NULL,
        reason      TEXT    NOT NULL,
        tier        TEXT    NOT NULL,
        confidence  REAL,
        decided_at  INTEGER NOT NULL
    );
    CREATE INDEX decisions_channel_time ON decisions (channel_id, decided_at);
    CREATE INDEX decisions_message ON decisions (message_id);
    CREATE INDEX decisions_time ON decisions (decided_at);
    """,
    # v3: tokens the model used for answers, per UTC day, server, channel and member.
    """
    CREATE TABLE token_usage (
        day           INTEGER NOT NULL, -- UTC days since 1970-01-01
        guild_id      INTEGER NOT NULL,
        channel_id    INTEGER NOT NULL,
        member_id     INTEGER NOT NULL,
        input_tokens  INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        answers       INTEGER NOT NULL,
        PRIMARY KEY (day, guild_id, channel_id, member_id)
    ) WITHOUT ROWID;
    """,
    # v4: whom each message mentioned or replied to, so context loaded from the archive is decided on as
    # context from Discord is; and each channel's /parley-admin forget marker, which context never reaches past.
    """
    ALTER TABLE messages ADD COLUMN mention_ids TEXT NOT NULL DEFAULT '';
    ALTER TABLE messages ADD COLUMN reply_to_author_id INTEGER;
    ALTER TABLE messages ADD COLUMN mentions_everyone INTEGER NOT NULL DEFAULT 0;

    CREATE TABLE forget_markers (
        channel_id INTEGER PRIMARY KEY,
        guild_id   INTEGER NOT NULL,
        -- Context starts after this message id (a snowflake of the moment of the forget).
        after_id   INTEGER NOT NULL
    );
    CREATE INDEX forget_markers_guild ON forget_markers (guild_id);
    """,
    # v5: small named values the bot keeps between runs (the hash of its last command sync).
    """
    CREATE TABLE bot_state (
        name  TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # v6: facts Parley was asked to remember (memory/store.py), with their own full-text index; and named
    # copies of a channel's conversation model history (/parley-admin context save).
    """
    CREATE TABLE memories (
        id                INTEGER PRIMARY KEY,
        guild_id          INTEGER NOT NULL,
        channel_id        INTEGER NOT NULL,
        -- Whom the fact is about: the member who said it when it is about themselves, else NULL.
        about_id          INTEGER,
        said_by_id        INTEGER NOT NULL,
        source_message_id INTEGER NOT NULL,
        fact              TEXT    NOT NULL,
        created_at        INTEGER NOT NULL
    );
    CREATE INDEX memories_channel ON memories (channel_id, id);
    CREATE INDEX memories_about ON memories (guild_id, about_id, id);
    CREATE INDEX memories_said_by ON memories (guild_id, said_by_id);
    CREATE INDEX memories_source ON memories (source_message_id);
    CREATE INDEX memories_time ON memories (created_at);
    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        fact,
        content = 'memories', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER memories_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, fact) VALUES (new.id, new.fact);
    END;
    CREATE TRIGGER memories_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, fact) VALUES ('delete', old.id, old.fact);
    END;

    CREATE TABLE context_snapshots (
        channel_id INTEGER NOT NULL,
        name       TEXT    NOT NULL,
        guild_id   INTEGER NOT NULL,
        saved_by   INTEGER NOT NULL,
        saved_at   INTEGER NOT NULL,
        -- pydantic-ai's ModelMessagesTypeAdapter JSON.
        history    TEXT    NOT NULL,
        PRIMARY KEY (channel_id, name)
    );
    CREATE INDEX context_snapshots_guild ON context_snapshots (guild_id);
    CREATE INDEX context_snapshots_time ON context_snapshots (saved_at);
    """,
    # v7: live conversations (engine state and model history, so a restart picks them up) and the summaries
    # of ended ones, which the channel's next conversation starts with.
    """
    CREATE TABLE conversations (
        channel_id    INTEGER PRIMARY KEY,
        last_activity INTEGER NOT NULL,
        state         TEXT    NOT NULL -- sessions.snapshot JSON
    );
    CREATE TABLE conversation_summaries (
        id         INTEGER PRIMARY KEY,
        channel_id INTEGER NOT NULL,
        ended_at   INTEGER NOT NULL,
        summary    TEXT    NOT NULL,
        -- The ids of the oldest and newest messages it was written from: deleting any between drops it.
        first_id   INTEGER NOT NULL,
        last_id    INTEGER NOT NULL
    );
    CREATE INDEX conversation_summaries_channel ON conversation_summaries (channel_id, ended_at);
    CREATE INDEX conversation_summaries_time ON conversation_summaries (ended_at);
    """,
    # v8: the channels where an @mention opens a thread (/parley-admin threads), and the threads Parley opened,
    # in which every message is for it while they are open.
    """
    CREATE TABLE thread_settings (
        channel_id INTEGER PRIMARY KEY,
        guild_id   INTEGER NOT NULL,
        threads    INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX thread_settings_guild ON thread_settings (guild_id);
    CREATE TABLE own_threads (
        thread_id INTEGER PRIMARY KEY,
        parent_id INTEGER NOT NULL,
        guild_id  INTEGER NOT NULL,
        opened_at INTEGER NOT NULL
    );
    CREATE INDEX own_threads_parent ON own_threads (parent_id);
    CREATE INDEX own_threads_guild ON own_threads (guild_id);
    """,
    # v9: what members shared with their messages: names, types, sizes and the text read from them (text files,
    # PDFs, transcripts), searchable beside the messages; a message's attachments go with it.
    """
    CREATE TABLE attachments (
        attachment_id INTEGER PRIMARY KEY,
        message_id    INTEGER NOT NULL,
        channel_id    INTEGER NOT NULL,
        filename      TEXT    NOT NULL,
        content_type  TEXT    NOT NULL,
        size          INTEGER NOT NULL,
        text          TEXT    NOT NULL DEFAULT ''
    );
    CREATE INDEX attachments_message ON attachments (message_id);
    CREATE VIRTUAL TABLE attachments_fts USING fts5 (
        filename, text,
        content = 'attachments', content_rowid = 'attachment_id',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER attachments_insert AFTER INSERT ON attachments BEGIN
        INSERT INTO attachments_fts (rowid, filename, text) VALUES (new.attachment_id, new.filename, new.text);
    END;
    CREATE TRIGGER attachments_delete AFTER DELETE ON attachments BEGIN
        INSERT INTO attachments_fts (attachments_fts, rowid, filename, text)
        VALUES ('delete', old.attachment_id, old.filename, old.text);
    END;
    CREATE TRIGGER attachments_update AFTER UPDATE OF filename, text ON attachments
    WHEN old.filename IS NOT new.filename OR old.text IS NOT new.text BEGIN
        INSERT INTO attachments_fts (attachments_fts, rowid, filename, text)
        VALUES ('delete', old.attachment_id, old.filename, old.text);
        INSERT INTO attachments_fts (rowid, filename, text) VALUES (new.attachment_id, new.filename, new.text);
    END;
    -- However a message goes (deleted, its channel or server deleted, pruned), what it shared goes with it.
    CREATE TRIGGER messages_delete_attachments AFTER DELETE ON messages BEGIN
        DELETE FROM attachments WHERE message_id = old.message_id;
    END;
    """,
    # v10: per model (its price differs), the cached input tokens providers report, and the judge's calls
    # apart from answers (v3's `answers` counted both); older rows have model '' (unknown).
    """
    CREATE TABLE token_usage_by_model (
        day                 INTEGER NOT NULL, -- UTC days since 1970-01-01
        guild_id            INTEGER NOT NULL,
        channel_id          INTEGER NOT NULL,
        member_id           INTEGER NOT NULL,
        model               TEXT    NOT NULL, -- provider:model as the provider named it
        input_tokens        INTEGER NOT NULL,
        cached_input_tokens INTEGER NOT NULL,
        output_tokens       INTEGER NOT NULL,
        answers             INTEGER NOT NULL,
        judge_calls         INTEGER NOT NULL,
        PRIMARY KEY (day, guild_id, channel_id, member_id, model)
    ) WITHOUT ROWID;
    INSERT INTO token_usage_by_model
        SELECT day, guild_id, channel_id, member_id, '', input_tokens, 0, output_tokens, answers, 0 FROM token_usage;
    DROP TABLE token_usage;
    ALTER TABLE token_usage_by_model RENAME TO token_usage;
    """,
    # v11: profiles (profiles/channels.py): each value a /parley-admin profile command set for a channel or, under the
    # server's id, for a server, with who set it and when. The channel modes move there.
    """
    CREATE TABLE profile_settings (
        scope_id INTEGER NOT NULL, -- a channel's id, or its server's for the server default
        field    TEXT    NOT NULL,
        guild_id INTEGER NOT NULL,
        value    TEXT    NOT NULL,
        set_by   INTEGER,          -- NULL for a mode set before v11, whose setter was not kept
        set_at   INTEGER NOT NULL,
        PRIMARY KEY (scope_id, field)
    ) WITHOUT ROWID;
    CREATE INDEX profile_settings_guild ON profile_settings (guild_id);
    INSERT INTO profile_settings (scope_id, field, guild_id, value, set_by, set_at)
        SELECT channel_id, 'mode', guild_id, mode, NULL, updated_at FROM channel_settings;
    DROP TABLE channel_settings;
    """,
    # v12, v13: Postgres's own (its search lexemes, its change notifications); nothing here, so that a table both
    # backends add gets the same number in both.
    "",
    "",
    # v14: how far each channel's recheck of its archived messages against Discord has got
    # (upkeep/reconciliation.py), so that it goes on where it stopped after a restart.
    """
    CREATE TABLE reconciliation (
        channel_id INTEGER PRIMARY KEY,
        guild_id   INTEGER NOT NULL,
        upto_id    INTEGER NOT NULL, -- the pass checks the archived messages older than this id
        reached_id INTEGER NOT NULL, -- it has checked those from this id up; 0 once it reached the oldest
        again_id   INTEGER           -- Parley was away again during the pass: another pass, below this id, follows
    );
    CREATE INDEX reconciliation_guild ON reconciliation (guild_id);
    """,
    # v15: Postgres's own (members' answers counted for every process, archive/allowances.py); one process counts
    # them in memory. Nothing here, so that a table both backends add next gets the same number in both.
    "",
    # v16: the members who opted out in a server (/parley privacy optout): none of their messages is archived,
    # and Parley does not answer them. Kept while they stay opted out, retention apart: it is a standing choice.
    """
    CREATE TABLE opt_outs (
        guild_id     INTEGER NOT NULL,
        member_id    INTEGER NOT NULL,
        opted_out_at INTEGER NOT NULL,
        PRIMARY KEY (guild_id, member_id)
    ) WITHOUT ROWID;
    CREATE INDEX opt_outs_member ON opt_outs (member_id);
    """,
    # v17: the servers' access lists (admission/access_lists.py): each channel, category, role or member a
    # /parley-admin access command allowed or blocked, with who did it and when; one entry per target. A deleted
    # channel keeps its entry (the server's go with it): dropping the only allowed channel's would open every other.
    """
    CREATE TABLE access_entries (
        guild_id  INTEGER NOT NULL,
        target_id INTEGER NOT NULL,
        kind      TEXT    NOT NULL, -- channel, category, role or member
        listed    TEXT    NOT NULL, -- allow or block
        set_by    INTEGER NOT NULL,
        set_at    INTEGER NOT NULL,
        PRIMARY KEY (guild_id, target_id)
    ) WITHOUT ROWID;
    """,
    # v18: the messages from while Parley was away that one process took up to decide (answering/gap.py):
    # claimed here first, so processes sharing an archive never answer the same one twice.
    """
    CREATE TABLE message_claims (
        message_id INTEGER PRIMARY KEY,
        claimant   TEXT    NOT NULL, -- the process that took it up
        claimed_at INTEGER NOT NULL
    );
    """,
    # v19 (digest): each channel's digest (/parley-admin digest, upkeep/digests.py): its schedule, and the digest
    # period last taken up (archive/digests.py), so a digest is posted once per period across restarts.
    """
    CREATE TABLE digests (
        channel_id  INTEGER PRIMARY KEY,
        guild_id    INTEGER NOT NULL,
        every       TEXT    NOT NULL, -- daily or weekly
        hour        INTEGER NOT NULL, -- 0 to 23, in TIMEZONE
        weekday     INTEGER NOT NULL, -- 0 (Monday) to 6, for a weekly digest
        last_period INTEGER NOT NULL, -- when the latest digest taken up was due, ms since the epoch
        claimant    TEXT    NOT NULL, -- the process that took it up ('' before any)
        set_by      INTEGER NOT NULL,
        set_at      INTEGER NOT NULL
    );
    CREATE INDEX digests_guild ON digests (guild_id);
    """,
    # v20 (remind): reminders and timed posts (archive/reminders.py): each posted at `due_at` by the process that
    # claims it; a one-off's claim sets `delivered_at`, a recurring one's moves `due_at` on. `claim` is the
    # token of the claim that stood.
    """
    CREATE TABLE reminders (
        id           INTEGER PRIMARY KEY,
        guild_id     INTEGER NOT NULL, -- 0: a direct message
        channel_id   INTEGER NOT NULL,
        owner_id     INTEGER NOT NULL,
        text         TEXT    NOT NULL,
        due_at       INTEGER NOT NULL,
        every        TEXT    NOT NULL, -- '' once, else its recurrence (reminders/when.py)
        post_here    INTEGER NOT NULL, -- 1: a timed post to the channel, pinging no one
        created_at   INTEGER NOT NULL,
        delivered_at INTEGER,
        claim        TEXT
    );
    CREATE INDEX reminders_due ON reminders (due_at) WHERE delivered_at IS NULL;
    CREATE INDEX reminders_owner ON reminders (guild_id, owner_id);
    """,
    # v21 (knowledge): the knowledge base (archive/knowledge.py): each server's documents and their sections, with
    # the sections' full-text index. Sections' ids are never handed out again (AUTOINCREMENT): the vector index
    # (knowledge/base.py's SectionVectors) knows them by id.
    """
    CREATE TABLE knowledge_documents (
        id         INTEGER PRIMARY KEY,
        guild_id   INTEGER NOT NULL,
        source     TEXT    NOT NULL, -- file:<name> or pin:<channel_id>:<message_id>, unique in the server
        title      TEXT    NOT NULL,
        channel_id INTEGER,          -- NULL: server-wide; else only that channel's readers find it
        added_by   INTEGER NOT NULL,
        added_at   INTEGER NOT NULL,
        UNIQUE (guild_id, source)
    );
    CREATE TABLE knowledge_sections (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        document_id INTEGER NOT NULL,
        position    INTEGER NOT NULL,
        heading     TEXT    NOT NULL,
        text        TEXT    NOT NULL
    );
    CREATE INDEX knowledge_sections_document ON knowledge_sections (document_id, position);
    CREATE VIRTUAL TABLE knowledge_fts USING fts5 (
        heading, text,
        content = 'knowledge_sections', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER knowledge_sections_insert AFTER INSERT ON knowledge_sections BEGIN
        INSERT INTO knowledge_fts (rowid, heading, text) VALUES (new.id, new.heading, new.text);
    END;
    CREATE TRIGGER knowledge_sections_delete AFTER DELETE ON knowledge_sections BEGIN
        INSERT INTO knowledge_fts (knowledge_fts, rowid, heading, text)
            VALUES ('delete', old.id, old.heading, old.text);
    END;
    """,
    # v22 (vectors): the knowledge sections waiting for an embedding, and what drops a deleted section's queued text
    # and vector (archive/vectors.py).
    SQLITE_QUEUE_TABLE,
    # v23 (pins): the channels whose pinned messages are taken into the knowledge base (edge/pins.py), with who
    # turned it on and when. A row per channel opted in; turning it off deletes the row.
    """
    CREATE TABLE pin_channels (
        channel_id INTEGER PRIMARY KEY,
        guild_id   INTEGER NOT NULL,
        set_by     INTEGER NOT NULL,
        set_at     INTEGER NOT NULL
    );
    CREATE INDEX pin_channels_guild ON pin_channels (guild_id);
    """,
    # v24 (erasure): the members who erased their data in a server (/parley privacy erase): what they wrote up to
    # `upto_id` (the last message id of the moment they erased) is never archived again, whichever path reads it back.
    # Kept when they erase again (moved on) and when their data is erased; the server's go when Parley leaves it.
    """
    CREATE TABLE erasures (
        guild_id  INTEGER NOT NULL,
        member_id INTEGER NOT NULL,
        upto_id   INTEGER NOT NULL,
        erased_at INTEGER NOT NULL,
        PRIMARY KEY (guild_id, member_id)
    ) WITHOUT ROWID;
    CREATE INDEX erasures_member ON erasures (member_id);
    """,
    # v25 (privacyreads): who wrote the message each decision quotes, so an erasure finds the excerpts of questions
    # asked by command (/ask), which are no archived message; 0 for no one (a placeholder) and rows from before.
    "ALTER TABLE decisions ADD COLUMN author_id INTEGER NOT NULL DEFAULT 0;",
    # v26 (picker): the model each member chose for the answers to them in a server (`/parley model`), among
    # MEMBER_MODELS; the member's data, exported and erased with it, and the server's go when Parley leaves it.
    """
    CREATE TABLE member_models (
        guild_id  INTEGER NOT NULL,
        member_id INTEGER NOT NULL,
        model     TEXT   NOT NULL,
        chosen_at INTEGER NOT NULL,
        PRIMARY KEY (guild_id, member_id)
    ) WITHOUT ROWID;
    """,
    # v27 (supportfeedback): the askers' feedback on the support desk's answers (archive/support_feedback.py): a row
    # per question, offered when its answer's Solved and Not helpful buttons are posted, its verdict set by the
    # asker's press. The asker's rows go with their erasure; the server's with it.
    """
    CREATE TABLE support_feedback (
        question_id INTEGER PRIMARY KEY,
        guild_id    INTEGER NOT NULL,
        channel_id  INTEGER NOT NULL,
        asker_id    INTEGER NOT NULL,
        post_id     INTEGER NOT NULL,
        verdict     TEXT    NOT NULL,
        offered_at  INTEGER NOT NULL,
        decided_at  INTEGER
    );
    CREATE INDEX support_feedback_guild_time ON support_feedback (guild_id, offered_at);
    CREATE INDEX support_feedback_asker ON support_feedback (guild_id, asker_id);
    CREATE INDEX support_feedback_channel ON support_feedback (channel_id);
    """,
    # v28 (images): the images made a day for each member in each channel with each model, beside their tokens
    # (tools/images.py): what IMAGES_PER_MEMBER_PER_DAY and IMAGES_PER_SERVER_PER_DAY count, and the usage report.
    "ALTER TABLE token_usage ADD COLUMN images INTEGER NOT NULL DEFAULT 0;",
    # v29 (prefix): Postgres's own (the knowledge documents' change notifications); nothing here.
    "",
    # v30 (moderation): moderation (archive/moderation.py, moderation/): the cases (a reported or flagged message under
    # review, one per message; its text kept while it is open), the reports in them (one per member and message),
    # every action taken on a member's say, each server's settings, its watched channels and its screening tokens.
    """
    CREATE TABLE moderation_cases (
        id              INTEGER PRIMARY KEY,
        guild_id        INTEGER NOT NULL,
        channel_id      INTEGER NOT NULL,
        message_id      INTEGER NOT NULL UNIQUE,
        author_id       INTEGER NOT NULL, -- the member reported
        content         TEXT    NOT NULL, -- '' once closed
        source          TEXT    NOT NULL, -- 'report' or 'watch'
        opened_at       INTEGER NOT NULL,
        rule            TEXT    NOT NULL DEFAULT '',
        confidence      REAL    NOT NULL DEFAULT 0,
        summary         TEXT    NOT NULL DEFAULT '',
        card_channel_id INTEGER,
        card_message_id INTEGER,
        closed_at       INTEGER,
        closed_by       INTEGER
    );
    CREATE INDEX moderation_cases_guild ON moderation_cases (guild_id, opened_at);
    CREATE INDEX moderation_cases_author ON moderation_cases (guild_id, author_id);
    CREATE TABLE moderation_reports (
        message_id  INTEGER NOT NULL,
        reporter_id INTEGER NOT NULL,
        guild_id    INTEGER NOT NULL,
        reason      TEXT    NOT NULL,
        reported_at INTEGER NOT NULL,
        PRIMARY KEY (message_id, reporter_id)
    ) WITHOUT ROWID;
    CREATE INDEX moderation_reports_reporter ON moderation_reports (guild_id, reporter_id, reported_at);
    CREATE TABLE moderation_actions (
        id                INTEGER PRIMARY KEY,
        guild_id          INTEGER NOT NULL,
        channel_id        INTEGER NOT NULL,
        action            TEXT    NOT NULL,
        actor_id          INTEGER NOT NULL,
        requested_by      INTEGER,
        target_member_id  INTEGER,
        target_message_id INTEGER,
        detail            TEXT    NOT NULL,
        case_id           INTEGER,
        at                INTEGER NOT NULL
    );
    CREATE INDEX moderation_actions_guild ON moderation_actions (guild_id, at);
    CREATE TABLE moderation_settings (
        guild_id    INTEGER PRIMARY KEY,
        channel_id  INTEGER, -- where case cards go; NULL: reports are not taken
        rules       TEXT    NOT NULL, -- the rules' text set by command
        rules_document_id INTEGER, -- or the knowledge base's document marked as the rules
        watch_words TEXT    NOT NULL, -- one a line
        set_by      INTEGER NOT NULL,
        set_at      INTEGER NOT NULL
    );
    CREATE TABLE moderation_watch (
        channel_id INTEGER PRIMARY KEY,
        guild_id   INTEGER NOT NULL,
        set_by     INTEGER NOT NULL,
        set_at     INTEGER NOT NULL
    );
    CREATE INDEX moderation_watch_guild ON moderation_watch (guild_id);
    CREATE TABLE screening_usage (
        guild_id INTEGER NOT NULL,
        day      INTEGER NOT NULL,
        tokens   INTEGER NOT NULL,
        PRIMARY KEY (guild_id, day)
    ) WITHOUT ROWID;
    """,
    # v31 (supportdesk): the channels in support mode (/parley-admin support, helpdesk/): a row per channel turned on,
    # with who did it and when; turning it off deletes the row. And the forum posts waiting for their hand-off to the
    # staff role, claimed by one conditional update so one process hands each off, once, across restarts.
    """
    CREATE TABLE support_channels (
        channel_id INTEGER PRIMARY KEY,
        guild_id   INTEGER NOT NULL,
        set_by     INTEGER NOT NULL,
        set_at     INTEGER NOT NULL
    );
    CREATE INDEX support_channels_guild ON support_channels (guild_id);
    CREATE TABLE support_handoffs (
        message_id INTEGER PRIMARY KEY, -- a forum post's first message, whose id is its thread's
        guild_id   INTEGER NOT NULL,
        asker_id   INTEGER NOT NULL,
        due_at     INTEGER NOT NULL,
        claimant   TEXT              -- the process that handed it off; NULL while it waits
    );
    CREATE INDEX support_handoffs_due ON support_handoffs (due_at) WHERE claimant IS NULL;
    """,
    # v32 (schedule): a reminder may be a scheduled prompt (`/parley-admin schedule`, reminders/scheduler.py): its
    # text is asked of the model at each time, on the reminders' claims, and the answer posted.
    "ALTER TABLE reminders ADD COLUMN prompt INTEGER NOT NULL DEFAULT 0;",
)

# bm25 ranks the newest candidates among the channel's matches: FTS5 walks the
# channel's rowid range backwards, the join drops rows outside the window.
_SEARCH_SQL = f"""
SELECT {_MESSAGE_COLUMNS} FROM (
    SELECT {", ".join("m." + name for name in _MESSAGE_COLUMNS.split(", "))},
        bm25(messages_fts) AS score
    FROM messages_fts CROSS JOIN messages AS m ON m.search_key = messages_fts.rowid
    WHERE messages_fts MATCH :match
        AND messages_fts.rowid BETWEEN {{low}}
            AND (SELECT (slot << {_SEQ_BITS}) | {_SEQ_MASK} FROM channels WHERE channel_id = :channel)
        AND m.created_at >= :since AND {NOT_OPTED_OUT}
    ORDER BY messages_fts.rowid DESC
    LIMIT :candidates
)
ORDER BY score, created_at DESC, message_id DESC
LIMIT :limit
"""
_SEARCH_ALL_SQL = _SEARCH_SQL.format(low=f"(SELECT slot << {_SEQ_BITS} FROM channels WHERE channel_id = :channel)")
# With a time window, start the walk at the window's lowest key (read off the
# covering index) rather than filtering every older match through the join.
_SEARCH_WINDOW_SQL = _SEARCH_SQL.format(
    low="(SELECT min(search_key) FROM messages WHERE channel_id = :channel AND created_at >= :since)"
)

# The excerpt of the matching attachment text travels as the attachment's text, so the model sees why it matched.
_SEARCH_ATTACHMENTS_SQL = f"""
SELECT {", ".join("m." + name for name in _MESSAGE_COLUMNS.split(", "))},
    a.attachment_id, a.filename, a.content_type, a.size,
    snippet(attachments_fts, 1, '', '', '…', 40)
FROM attachments_fts
    JOIN attachments AS a ON a.attachment_id = attachments_fts.rowid
    JOIN messages AS m ON m.message_id = a.message_id
WHERE attachments_fts MATCH :match AND a.channel_id = :channel AND m.created_at >= :since
    AND {NOT_OPTED_OUT}
ORDER BY bm25(attachments_fts), m.created_at DESC
LIMIT :limit
"""


SQLITE_MESSAGES = MessageDialect(
    match=lambda query, op: match_expression(query, op),
    # A channel's messages are a rowid range of the one index, so the whole query applies to it.
    channel_match=lambda channel_id, match: match,
    search_all_sql=_SEARCH_ALL_SQL,
    search_window_sql=_SEARCH_WINDOW_SQL,
    search_attachments_sql=_SEARCH_ATTACHMENTS_SQL,
    attachments_sql="SELECT message_id, attachment_id, filename, content_type, size, text FROM attachments"
    " WHERE message_id IN (SELECT value FROM json_each(:ids)) ORDER BY attachment_id",
    ids=lambda values: json.dumps(list(values)),
)

# bm25 ranks the newest in-scope matches only (`RECALL_CANDIDATES`).
_RECALL_MEMORIES_SQL = f"""
SELECT {MEMORY_COLUMNS} FROM (
    SELECT {", ".join("m." + name for name in MEMORY_COLUMNS.split(", "))}, bm25(memories_fts) AS score
    FROM memories_fts CROSS JOIN memories AS m ON m.id = memories_fts.rowid
    WHERE memories_fts MATCH :match AND {MEMORY_SCOPE}
    ORDER BY memories_fts.rowid DESC
    LIMIT {RECALL_CANDIDATES}
)
ORDER BY score, id DESC
LIMIT :limit
"""

_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA busy_timeout = 5000",
    "PRAGMA cache_size = -32768",
    # Without a cap the WAL file keeps the size of the largest burst forever.
    "PRAGMA journal_size_limit = 67108864",
    # Deleted messages must be gone, not left readable in free pages of the file (Discord's terms).
    "PRAGMA secure_delete = ON",
)


# A message keeps its channel, guild and search key; the rest is replaced.
_ADD = _Write(
    "add",
    (
        f"INSERT INTO messages ({_MESSAGE_COLUMNS}, search_key) SELECT * FROM (VALUES {{rows}}) AS added"
        f" WHERE NOT {withheld('added.column2', 'added.column4', 'added.column1')}"
        " ON CONFLICT (message_id) DO UPDATE SET author_id = excluded.author_id,"
        " author_name = excluded.author_name, content = excluded.content,"
        " created_at = excluded.created_at, edited_at = excluded.edited_at,"
        " is_bot = excluded.is_bot, reply_to_message_id = excluded.reply_to_message_id,"
        " mention_ids = excluded.mention_ids, reply_to_author_id = excluded.reply_to_author_id,"
        " mentions_everyone = excluded.mentions_everyone",
    ),
    row="(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
)
_EDIT = _Write(
    "edit",
    (
        "UPDATE messages SET content = ?2, edited_at = ?3 WHERE message_id = ?1"
        f" AND NOT {withheld('messages.guild_id', 'messages.author_id', 'messages.message_id')}",
    ),
)
# A deleted message's excerpt in the decision log is a copy of it: drop it too.
_DELETE = _Write(
    "delete",
    (
        # Before the messages go: a summary written from a deleted message may repeat it.
        "DELETE FROM conversation_summaries WHERE EXISTS (SELECT 1 FROM messages AS m"
        " WHERE m.message_id IN ({rows}) AND m.channel_id = conversation_summaries.channel_id"
        " AND m.message_id BETWEEN conversation_summaries.first_id AND conversation_summaries.last_id)",
        "DELETE FROM messages WHERE message_id IN ({rows})",
        "DELETE FROM decisions WHERE message_id IN ({rows})",
        "DELETE FROM support_feedback WHERE question_id IN ({rows})",
        # A memory is a copy of what its source message said.
        "DELETE FROM memories WHERE source_message_id IN ({rows})",
    ),
    row="?",
)
# A re-added message (catch-up) keeps the text already read from its attachments.
_ADD_ATTACHMENT = _Write(
    "add_attachment",
    (
        "INSERT INTO attachments (attachment_id, message_id, channel_id, filename, content_type, size)"
        " SELECT ?1, ?2, ?3, ?4, ?5, ?6 FROM messages AS m WHERE m.message_id = ?2"
        f" AND NOT {withheld('m.guild_id', 'm.author_id', 'm.message_id')}"
        " ON CONFLICT (attachment_id) DO UPDATE SET filename = excluded.filename,"
        " content_type = excluded.content_type, size = excluded.size",
    ),
)
_ATTACHMENT_TEXT = _Write(
    "set_attachment_text",
    (
        "UPDATE attachments SET text = ?2 WHERE attachment_id = ?1 AND NOT EXISTS (SELECT 1 FROM messages AS m"
        f" WHERE m.message_id = attachments.message_id AND {withheld('m.guild_id', 'm.author_id', 'm.message_id')})",
    ),
)
# Who shared an attachment and the bytes of file text kept on its day (`archive.file_text`) in its channel and from
# them. A day's files are a range of the primary key; the text is read (to measure it) only for the rows counted, at
# most a budget's worth (this SQLite has no octet_length). The notes left in place of text over a budget count nothing.
_FILE_TEXT_USAGE_SQL = """
SELECT a.channel_id, m.author_id,
    (SELECT coalesce(sum(length(CAST(c.text AS BLOB))), 0) FROM attachments AS c
        WHERE c.attachment_id BETWEEN ?2 AND ?3 AND c.channel_id = a.channel_id
            AND c.attachment_id != a.attachment_id AND c.text NOT IN (?4, ?5)),
    (SELECT coalesce(sum(length(CAST(o.text AS BLOB))), 0) FROM attachments AS o
        JOIN messages AS n ON n.message_id = o.message_id
        WHERE o.attachment_id BETWEEN ?2 AND ?3 AND n.author_id = m.author_id
            AND o.attachment_id != a.attachment_id AND o.text NOT IN (?4, ?5))
FROM attachments AS a JOIN messages AS m ON m.message_id = a.message_id
WHERE a.attachment_id = ?1
"""
_KEEP_ATTACHMENTS = _Write(
    "keep_attachments",
    ("DELETE FROM attachments WHERE message_id = ?1 AND attachment_id NOT IN (SELECT value FROM json_each(?2))",),
)

# A kind of write other modules queue through `SQLiteArchive.enqueue`.
Write = _Write


class SQLiteArchive(
    MessageReads,
    BotReads,
    BatchWriter["_Writer"],
    StoreTables,
    MemberTables,
    PinChannelRows,
    MemberModelRows,
    SupportChannelRows,
    DigestTables,
    ReminderTables,
    ModerationTables,
    KnowledgeTables,
    SQLiteVectorTables,
    FeedbackRows,
):
    """Message archive backed by one SQLite file.

    Writes (``add``, ``edit``, ``delete*``, ``record_decision``) are synchronous
    and only enqueue; a single writer task commits them in order, one
    transaction per batch, at least every ``flush_interval`` seconds. Reads see
    committed data only: they do not flush first, because the bot keeps the
    last moments of a conversation in memory anyway and a read should never
    wait behind a backlog of writes. Call ``flush()`` first to read your writes.
    """

    writes = write_kinds(
        add=_ADD,
        add_attachment=_ADD_ATTACHMENT,
        edit=_EDIT,
        delete=_DELETE,
        attachment_text=_ATTACHMENT_TEXT,
        keep_attachments=_KEEP_ATTACHMENTS,
    )

    dialect = "sqlite"

    def __init__(
        self,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        keys: _SearchKeys,
        *,
        retention_days: int,
        flush_interval: float,
        batch_size: int,
        prune_interval: float,
        file_text_budget: FileTextBudget | None,
    ) -> None:
        self._db = writer
        self._reader = reader
        # aiosqlite's threads are not daemons: an unclosed connection keeps the process alive.
        self._connections = (reader.close, writer.close)
        self._search_key = keys.next
        writing = _Writer(writer)
        self._writer_connection = lambda: contextlib.nullcontext(writing)
        self._start_queue(
            retention_days=retention_days,
            batch_size=batch_size,
            flush_interval=flush_interval,
            prune_interval=prune_interval,
            file_text_budget=file_text_budget,
        )

    @classmethod
    async def open(
        cls,
        path: Path | str,
        *,
        retention_days: int = 90,
        flush_interval: float = 0.5,
        batch_size: int = 1000,
        prune_interval: float = 3600.0,
        file_text_budget: FileTextBudget | None = None,
        claim: ArchiveClaim | None = None,
    ) -> SQLiteArchive:
        """Open (creating it and its folder if needed) and migrate the archive, then start the writer.

        ``retention_days=0`` keeps everything; otherwise older messages and
        decisions are pruned now and every ``prune_interval`` seconds. Open
        each file once per process: the writer is the file's only writer. ``claim``, the process's lock on the
        file (`archive.exclusive`), is released when the archive closes; if opening fails, it is the caller's.
        """
        if retention_days < 0 or flush_interval <= 0 or batch_size < 1 or prune_interval <= 0:
            raise ValueError("retention_days must be >= 0; intervals and batch_size positive")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = await _connect(path)
        try:
            await _migrate(writer, path)
            keys = await _SearchKeys.load(writer)
            reader = await _connect(path, read_only=True)
        except BaseException:
            await writer.close()
            raise
        archive = cls(
            writer,
            reader,
            keys,
            retention_days=retention_days,
            flush_interval=flush_interval,
            batch_size=batch_size,
            prune_interval=prune_interval,
            file_text_budget=file_text_budget,
        )
        archive._claim = claim
        archive._start_writer()
        return archive

    # The table mixins' reads and writes (archive/message_reads.py, bot_reads.py, stores.py, ...): the same single
    # writer and read connection.

    recall_sql = _RECALL_MEMORIES_SQL
    knowledge_dialect = SQLITE_KNOWLEDGE
    message_dialect = SQLITE_MESSAGES
    file_text_usage_sql = _FILE_TEXT_USAGE_SQL

    async def read(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query on the read connection: committed data only."""
        return [tuple(row) for row in await self._reader.execute_fetchall(sql, params)]

    # Writer side (archive/writer.py): what SQLite runs on its writer connection.

    async def _execute_run(self, connection: _Writer, kind: _Write, params: list[tuple[Any, ...]]) -> None:
        if kind is _ADD:
            # FTS5 writes its pending index data out whenever a rowid is
            # lower than the previous one; in key order a batch is one run.
            params.sort(key=itemgetter(_SEARCH_KEY_FIELD))
        if kind.row is None:
            for statement in kind.statements:
                await connection.db.executemany(statement, params)
            return
        per_statement = _MAX_VARIABLES // len(params[0])
        for start in range(0, len(params), per_statement):
            chunk = params[start : start + per_statement]
            values = [value for op_params in chunk for value in op_params]
            for statement in kind.statements:
                await connection.db.execute(_expand(statement, kind.row, len(chunk)), values)

    async def _delete_older_than(self, connection: _Writer, cutoff_ms: int) -> int:
        db = connection.db
        await db.execute("DELETE FROM decisions WHERE decided_at < ?", (cutoff_ms,))
        await db.execute("DELETE FROM support_feedback WHERE offered_at < ?", (cutoff_ms,))
        await db.execute("DELETE FROM message_claims WHERE claimed_at < ?", (cutoff_ms,))
        # A one-off claimed but never deleted: its process stopped between the claim and the post.
        await db.execute("DELETE FROM reminders WHERE delivered_at < ?", (cutoff_ms,))
        await db.execute("DELETE FROM memories WHERE created_at < ?", (cutoff_ms,))
        await db.execute("DELETE FROM context_snapshots WHERE saved_at < ?", (cutoff_ms,))
        await db.execute("DELETE FROM conversation_summaries WHERE ended_at < ?", (cutoff_ms,))
        await db.execute("DELETE FROM conversations WHERE last_activity < ?", (cutoff_ms,))
        # A day is kept while any of it is inside the retention.
        await db.execute("DELETE FROM token_usage WHERE day < ?", (cutoff_ms // _MS_PER_DAY,))
        # Per channel, so each channel's oldest rows come off its time index.
        async with db.execute(
            "DELETE FROM messages WHERE channel_id IN (SELECT channel_id FROM channels) AND created_at < ?",
            (cutoff_ms,),
        ) as cursor:
            return cursor.rowcount


class _Writer:
    """SQLite's writer connection as the shared writer (archive/writer.py) uses it: asyncpg's calls."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self.db = db
        self._open = False

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """A transaction, or inside one a savepoint (as asyncpg nests them): rolled back if the block raises."""
        if self._open:
            if not self.db.in_transaction:
                # SQLite rolled the whole transaction back (a full disk, an I/O error): what follows must not be
                # committed on its own, as a savepoint outside a transaction would be.
                raise sqlite3.OperationalError("the transaction was rolled back")
            await self.db.execute("SAVEPOINT op")
            try:
                yield
            except BaseException:
                await self.db.execute("ROLLBACK TO op")
                await self.db.execute("RELEASE op")
                raise
            await self.db.execute("RELEASE op")
            return
        await self.db.execute("BEGIN IMMEDIATE")
        self._open = True
        try:
            yield
            await self.db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):  # nothing left to undo
                await self.db.execute("ROLLBACK")
            raise
        finally:
            self._open = False

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        return list(await self.db.execute_fetchall(sql, args))

    async def execute(self, sql: str, *args: Any) -> None:
        await self.db.execute(sql, args)


class _SearchKeys:
    """Hands out search keys, ``(channel slot << 40) | sequence``, on the event loop.

    Keys only grow within a channel; after a restart each channel resumes
    above its highest stored key, and new channels get slots above every
    stored one. One archive per file: two writers would hand out the same keys.
    """

    def __init__(self, last_keys: dict[int, int], next_slot: int) -> None:
        self._last = last_keys
        self._next_slot = next_slot

    @classmethod
    async def load(cls, db: aiosqlite.Connection) -> _SearchKeys:
        rows = await db.execute_fetchall(
            "SELECT channel_id, slot, (SELECT max(search_key) FROM messages"
            f" WHERE search_key BETWEEN slot << {_SEQ_BITS} AND (slot << {_SEQ_BITS}) | {_SEQ_MASK})"
            " FROM channels"
        )
        last = {channel: key or slot << _SEQ_BITS for channel, slot, key in rows}
        return cls(last, 1 + max((slot for _, slot, _ in rows), default=0))

    def next(self, channel_id: int) -> int:
        key = self._last.get(channel_id)
        if key is None:
            key = self._next_slot << _SEQ_BITS
            self._next_slot += 1
        key += 1
        self._last[channel_id] = key
        return key


async def _connect(path: Path, *, read_only: bool = False) -> aiosqlite.Connection:
    register_sqlite_vec()  # before connecting: an automatic extension reaches only connections opened after it
    # isolation_level=None: the writer issues BEGIN/COMMIT itself.
    db = await aiosqlite.connect(path, isolation_level=None)
    try:
        for pragma in _PRAGMAS:
            await db.execute(pragma)
        # The knowledge base's vectors (archive/vectors.py) are a vec0 table: both connections need the module.
        await load_sqlite_vec(db)
        if read_only:
            await db.execute("PRAGMA query_only = ON")
    except BaseException:
        await db.close()
        raise
    return db


async def _migrate(db: aiosqlite.Connection, path: Path) -> None:
    ((version,),) = await db.execute_fetchall("PRAGMA user_version")
    if version > len(MIGRATIONS):
        raise RuntimeError(f"{path} has schema version {version}; this code only knows up to {len(MIGRATIONS)}")
    for number in range(version + 1, len(MIGRATIONS) + 1):
        try:
            # user_version is set inside the transaction, so a migration and
            # its version bump commit together or not at all.
            await db.executescript(
                f"BEGIN IMMEDIATE;\n{MIGRATIONS[number - 1]}\nPRAGMA user_version = {number};\nCOMMIT;"
            )
        except BaseException:
            if db.in_transaction:
                await db.execute("ROLLBACK")
            raise
    if version < len(MIGRATIONS):
        # One line for the whole run: a first start applies every migration, which is not news line by line.
        logger.info("history: migrated %s from schema version %d to %d", path, version, len(MIGRATIONS))


@functools.cache
def _expand(statement: str, row: str, count: int) -> str:
    return statement.replace("{rows}", ", ".join([row] * count))


def match_expression(query: str, op: str) -> str | None:
    """An FTS5 MATCH expression for free text `query`, its words joined by `op` (AND or OR); None without words."""
    phrases = _query_phrases(query)
    return f" {op} ".join(phrases) if phrases else None


def _query_phrases(query: str) -> list[str]:
    """Turn free text into FTS5 string literals, one per distinct word, so no syntax survives.

    Stopwords are dropped unless nothing else is left.
    """
    return ['"' + word.replace('"', '""') + '"' for word in search_words(query)]
