"""The writes to the bot's own tables both backends share: deleting a channel's or a server's data, forget markers,
reply decisions, thread settings, the threads Parley opened, named state, token usage, live conversations and their
summaries, and the retention prune.

Each is written once, with SQLite-style placeholders (``?``, ``?N``), which the Postgres backend numbers its way;
the writes whose statements differ by database (messages, their attachments and words) are each backend's own.
"""

from __future__ import annotations

from archive import Write
from archive.queued import WriteKinds

DELETE_CHANNEL = Write(
    "delete_channel",
    (
        "DELETE FROM messages WHERE channel_id = ?",
        "DELETE FROM decisions WHERE channel_id = ?",
        "DELETE FROM profile_settings WHERE scope_id = ?",
        "DELETE FROM forget_markers WHERE channel_id = ?",
        "DELETE FROM memories WHERE channel_id = ?",
        "DELETE FROM context_snapshots WHERE channel_id = ?",
        "DELETE FROM conversations WHERE channel_id = ?",
        "DELETE FROM conversation_summaries WHERE channel_id = ?",
        "DELETE FROM thread_settings WHERE channel_id = ?",
        "DELETE FROM reconciliation WHERE channel_id = ?",
        "DELETE FROM digests WHERE channel_id = ?",
        "DELETE FROM own_threads WHERE thread_id = ?1 OR parent_id = ?1",
        "DELETE FROM pin_channels WHERE channel_id = ?",
        "DELETE FROM moderation_watch WHERE channel_id = ?",
    ),
)
DELETE_GUILD = Write(
    "delete_guild",
    (
        "DELETE FROM decisions WHERE channel_id IN ("
        " SELECT channel_id FROM channels WHERE guild_id = ?1"
        " UNION SELECT scope_id FROM profile_settings WHERE guild_id = ?1)",
        # Through the channel list so the (channel_id, ...) index does the work.
        "DELETE FROM messages WHERE channel_id IN (SELECT channel_id FROM channels WHERE guild_id = ?)",
        "DELETE FROM profile_settings WHERE guild_id = ?",
        "DELETE FROM access_entries WHERE guild_id = ?",
        "DELETE FROM token_usage WHERE guild_id = ?",
        "DELETE FROM forget_markers WHERE guild_id = ?",
        "DELETE FROM memories WHERE guild_id = ?",
        "DELETE FROM context_snapshots WHERE guild_id = ?",
        # A conversation's channel has archived messages, so the channel list knows its server.
        "DELETE FROM conversations WHERE channel_id IN (SELECT channel_id FROM channels WHERE guild_id = ?)",
        "DELETE FROM conversation_summaries WHERE channel_id IN (SELECT channel_id FROM channels WHERE guild_id = ?)",
        "DELETE FROM thread_settings WHERE guild_id = ?",
        "DELETE FROM digests WHERE guild_id = ?",
        "DELETE FROM reconciliation WHERE guild_id = ?",
        "DELETE FROM own_threads WHERE guild_id = ?",
        # The knowledge base's documents (archive/knowledge.py): the sections first, found through their documents.
        "DELETE FROM knowledge_sections WHERE document_id IN (SELECT id FROM knowledge_documents WHERE guild_id = ?)",
        "DELETE FROM knowledge_documents WHERE guild_id = ?",
        "DELETE FROM pin_channels WHERE guild_id = ?",
        "DELETE FROM erasures WHERE guild_id = ?",
        # Moderation (archive/moderation.py): the cases with their reports, the actions, the settings.
        "DELETE FROM moderation_reports WHERE guild_id = ?",
        "DELETE FROM moderation_cases WHERE guild_id = ?",
        "DELETE FROM moderation_actions WHERE guild_id = ?",
        "DELETE FROM moderation_settings WHERE guild_id = ?",
        "DELETE FROM moderation_watch WHERE guild_id = ?",
        "DELETE FROM screening_usage WHERE guild_id = ?",
    ),
)
FORGET = Write(
    "set_forget_marker",
    (
        "INSERT INTO forget_markers (channel_id, guild_id, after_id) VALUES (?, ?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, after_id = excluded.after_id",
    ),
)
DECISION = Write(
    "record_decision",
    (
        "INSERT INTO decisions (channel_id, message_id, author_name, excerpt,"
        " responded, reason, tier, confidence, decided_at, author_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    ),
)
SET_THREADS = Write(
    "set_thread_setting",
    (
        "INSERT INTO thread_settings (channel_id, guild_id, threads, updated_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, threads = excluded.threads,"
        " updated_at = excluded.updated_at",
    ),
)
ADD_OWN_THREAD = Write(
    "add_own_thread",
    (
        "INSERT INTO own_threads (thread_id, parent_id, guild_id, opened_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (thread_id) DO NOTHING",
    ),
)
SET_STATE = Write(
    "set_state",
    ("INSERT INTO bot_state (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",),
)
# Adds to the day's row, so a batch of answers by one member in one channel with one model is one row.
USAGE = Write(
    "record_usage",
    (
        "INSERT INTO token_usage (day, guild_id, channel_id, member_id, model, input_tokens, cached_input_tokens,"
        " output_tokens, answers, judge_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (day, guild_id, channel_id, member_id, model) DO UPDATE SET"
        " input_tokens = token_usage.input_tokens + excluded.input_tokens,"
        " cached_input_tokens = token_usage.cached_input_tokens + excluded.cached_input_tokens,"
        " output_tokens = token_usage.output_tokens + excluded.output_tokens,"
        " answers = token_usage.answers + excluded.answers,"
        " judge_calls = token_usage.judge_calls + excluded.judge_calls",
    ),
)
# Params are (cutoff_ms, future or None); handled apart because it reports a count.
PRUNE = Write("prune", ())
# Params are (channel_id,); the state is read when the batch is written (`save_conversation`).
SAVE_CONVERSATION = Write(
    "save_conversation",
    (
        "INSERT INTO conversations (channel_id, last_activity, state) VALUES (?, ?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET last_activity = excluded.last_activity, state = excluded.state",
    ),
)
DROP_CONVERSATION = Write("drop_conversation", ("DELETE FROM conversations WHERE channel_id = ?",))
ADD_SUMMARY = Write(
    "add_summary",
    ("INSERT INTO conversation_summaries (channel_id, ended_at, summary, first_id, last_id) VALUES (?, ?, ?, ?, ?)",),
)
DELETE_SUMMARIES = Write("delete_summaries", ("DELETE FROM conversation_summaries WHERE channel_id = ?",))


def write_kinds(
    *, add: Write, add_attachment: Write, edit: Write, delete: Write, attachment_text: Write, keep_attachments: Write
) -> WriteKinds:
    """A backend's writes: its own of messages and their attachments, and the ones here."""
    return WriteKinds(
        add=add,
        add_attachment=add_attachment,
        add_summary=ADD_SUMMARY,
        delete_channel=DELETE_CHANNEL,
        edit=edit,
        delete=delete,
        delete_guild=DELETE_GUILD,
        forget=FORGET,
        decision=DECISION,
        set_threads=SET_THREADS,
        add_own_thread=ADD_OWN_THREAD,
        set_state=SET_STATE,
        usage=USAGE,
        prune=PRUNE,
        save_conversation=SAVE_CONVERSATION,
        drop_conversation=DROP_CONVERSATION,
        delete_summaries=DELETE_SUMMARIES,
        attachment_text=attachment_text,
        keep_attachments=keep_attachments,
    )
