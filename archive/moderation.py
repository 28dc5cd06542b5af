"""Moderation in the archive: the cases (a reported or flagged message under review, one per message), the reports in
them, every action taken in a server on a member's say, and each server's moderation settings and watched channels
(moderation/ has the rules).

The SQL is written once here, in the SQLite dialect both backends take (as in reminders.py). A report is a count
claim (`Write.claim_scope`): its row is inserted only while its reporter has fewer reports in the server in the last
hour than the limit, counted by the statement that inserts, so racing reports cannot pass it; the case is inserted
by the write queued after it, only if the report was taken (or for a watch list's flag, which has no reporter), and a
message has one case (its unique key), so racing reports of one message make one case.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

from archive import ArchiveWriteFailed, Write
from archive.tables import BackendTables
from archive.times import from_ms, to_ms
from records import CaseReport, MessageReport, ModerationAction, ModerationCase, ModerationSettings, ReportFiled

_HOUR = timedelta(hours=1)
_ACTION_COLUMNS = (
    "guild_id, channel_id, action, actor_id, requested_by, target_member_id, target_message_id, detail, case_id, at"
)
_CASE_COLUMNS = (
    "c.id, c.guild_id, c.channel_id, c.message_id, c.author_id, c.content, c.source, c.opened_at,"
    " (SELECT count(*) FROM moderation_reports AS r WHERE r.message_id = c.message_id),"
    " c.rule, c.confidence, c.summary, c.card_channel_id, c.card_message_id, c.closed_at, c.closed_by"
)
_RECORD_ACTION = Write(
    "record_moderation_action",
    (f"INSERT INTO moderation_actions (id, {_ACTION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",),
)
# ?1 message, ?2 reporter, ?3 server, ?4 reason, ?5 when, ?6 an hour before, ?7 the limit.
_REPORT = Write(
    "report_message",
    (
        "INSERT INTO moderation_reports (message_id, reporter_id, guild_id, reason, reported_at)"
        " SELECT ?1, ?2, ?3, ?4, ?5"
        " WHERE NOT EXISTS (SELECT 1 FROM moderation_cases WHERE message_id = ?1 AND closed_at IS NOT NULL)"
        " AND (SELECT count(*) FROM moderation_reports WHERE guild_id = ?3 AND reporter_id = ?2"
        " AND reported_at > ?6) < ?7"
        " ON CONFLICT (message_id, reporter_id) DO NOTHING",
    ),
    claim_scope=itemgetter(2),
)
# Queued right after the report (the writer keeps their order), so it sees whether the report was taken: a case is
# opened for a report taken, or for a watch list's flag (?7 1).
_OPEN_CASE = Write(
    "open_case",
    (
        "INSERT INTO moderation_cases (id, guild_id, channel_id, message_id, author_id, content, source, opened_at)"
        " SELECT ?1, ?2, ?3, ?4, ?5, ?6, CASE WHEN ?7 = 1 THEN 'watch' ELSE 'report' END, ?8"
        " WHERE ?7 = 1 OR EXISTS (SELECT 1 FROM moderation_reports WHERE message_id = ?4 AND reporter_id = ?9)"
        " ON CONFLICT (message_id) DO NOTHING",
    ),
)
_ASSESS = Write(
    "assess_case",
    ("UPDATE moderation_cases SET rule = ?, confidence = ?, summary = ? WHERE id = ? AND closed_at IS NULL",),
)
_SET_CARD = Write(
    "set_case_card", ("UPDATE moderation_cases SET card_channel_id = ?, card_message_id = ? WHERE id = ?",)
)
# Closing drops the copy of the message's text and the model's summary of it: kept only while the case is open.
_CLOSE = Write(
    "close_case",
    (
        "UPDATE moderation_cases SET closed_at = ?, closed_by = ?, content = '', summary = ''"
        " WHERE id = ? AND closed_at IS NULL",
    ),
)
_SET_SETTINGS = Write(
    "set_moderation_settings",
    (
        "INSERT INTO moderation_settings (guild_id, channel_id, rules, rules_document_id, watch_words, set_by, set_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (guild_id) DO UPDATE SET channel_id = excluded.channel_id, rules = excluded.rules,"
        " rules_document_id = excluded.rules_document_id, watch_words = excluded.watch_words,"
        " set_by = excluded.set_by, set_at = excluded.set_at",
    ),
)
_WATCH = Write(
    "watch_channel",
    (
        "INSERT INTO moderation_watch (channel_id, guild_id, set_by, set_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, set_by = excluded.set_by,"
        " set_at = excluded.set_at",
    ),
)
_UNWATCH = Write("unwatch_channel", ("DELETE FROM moderation_watch WHERE channel_id = ?",))
_SCREENED = Write(
    "add_screening_tokens",
    (
        "INSERT INTO screening_usage (guild_id, day, tokens) VALUES (?, ?, ?)"
        " ON CONFLICT (guild_id, day) DO UPDATE SET tokens = screening_usage.tokens + excluded.tokens",
    ),
)
# A member's erasure (docs/limits-and-privacy.md): their reports go (who reported, and why); the closed cases about
# them go with their reports and actions; the actions about them outside an open case go; where they asked for an
# action, who asked is forgotten. What they did as staff stays: it is the server's record of its moderators.
_CLOSED_ABOUT = "SELECT id FROM moderation_cases WHERE guild_id = ?1 AND author_id = ?2 AND closed_at IS NOT NULL"
_ERASE = Write(
    "erase_member_moderation",
    (
        "DELETE FROM moderation_reports WHERE guild_id = ?1 AND reporter_id = ?2",
        "DELETE FROM moderation_reports WHERE message_id IN"
        " (SELECT message_id FROM moderation_cases WHERE guild_id = ?1 AND author_id = ?2 AND closed_at IS NOT NULL)",
        f"DELETE FROM moderation_actions WHERE guild_id = ?1 AND case_id IN ({_CLOSED_ABOUT})",
        "DELETE FROM moderation_actions WHERE guild_id = ?1 AND target_member_id = ?2 AND (case_id IS NULL OR"
        " case_id NOT IN (SELECT id FROM moderation_cases WHERE guild_id = ?1 AND closed_at IS NULL))",
        f"DELETE FROM moderation_cases WHERE id IN ({_CLOSED_ABOUT})",
        "UPDATE moderation_actions SET requested_by = NULL WHERE guild_id = ?1 AND requested_by = ?2",
    ),
)


class ModerationTables(BackendTables):
    """`archive.ModerationLog` on a backend's queue and read connection."""

    async def record_action(self, action: ModerationAction) -> int:
        """Keep `action` in the server's moderation log; its id, once it is committed.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        a = action
        action_id = await self.new_id("moderation_actions")
        self._enqueue(
            _RECORD_ACTION,
            (action_id, a.guild_id, a.channel_id, a.action, a.actor_id, a.requested_by, a.target_member_id,
             a.target_message_id, a.detail, a.case_id, to_ms(a.at)),
        )  # fmt: skip
        await self.flush()
        if not await self.read("SELECT 1 FROM moderation_actions WHERE id = ?", (action_id,)):
            raise ArchiveWriteFailed(f"the moderation action {a.action!r} could not be stored")
        return action_id

    async def moderation_actions(
        self, guild_id: int, *, member_id: int | None = None, limit: int = 25
    ) -> list[ModerationAction]:
        """The server's latest actions, newest first: every one, or those `member_id` took, asked for or was the
        target of."""
        sql = f"SELECT {_ACTION_COLUMNS} FROM moderation_actions WHERE guild_id = ?"
        params: tuple[int, ...] = (guild_id,)
        if member_id is not None:
            sql += " AND (actor_id = ? OR requested_by = ? OR target_member_id = ?)"
            params += (member_id, member_id, member_id)
        rows = await self.read(f"{sql} ORDER BY at DESC, id DESC LIMIT ?", (*params, limit))
        return [_action(row) for row in rows]

    async def report_message(self, report: MessageReport, *, per_hour: int) -> ReportFiled:
        """File `report`: a member's report counts while they have fewer than `per_hour` reports in the server in
        the hour before it, and joins the message's open case or opens one (a watch list's flag, with no reporter,
        only opens one); see `ReportFiled`.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        r = report
        case_id = await self.new_id("moderation_cases")
        at = to_ms(r.at)
        flagged = r.reporter_id is None
        if not flagged:
            self._enqueue(
                _REPORT, (r.message_id, r.reporter_id, r.guild_id, r.reason, at, to_ms(r.at - _HOUR), per_hour)
            )
        self._enqueue(
            _OPEN_CASE,
            (case_id, r.guild_id, r.channel_id, r.message_id, r.author_id, r.content, int(flagged), at,
             r.reporter_id or 0),
        )  # fmt: skip
        await self.flush()
        case = await self._case_where("c.message_id = ?", (r.message_id,))
        if r.reporter_id is None:
            if case is None:
                raise ArchiveWriteFailed(f"the case of message {r.message_id} could not be stored")
            return ReportFiled(_outcome(case, case_id, fresh=True), case)
        rows = await self.read(
            "SELECT reported_at FROM moderation_reports WHERE message_id = ? AND reporter_id = ?",
            (r.message_id, r.reporter_id),
        )
        if case is not None and not case.is_open:
            return ReportFiled("reviewed", case)
        if not rows or case is None:
            if await self.reports_in_hour(r.guild_id, r.reporter_id, r.at) < per_hour:
                raise ArchiveWriteFailed(f"the report of message {r.message_id} could not be stored")
            return ReportFiled("limited", None)
        return ReportFiled(_outcome(case, case_id, fresh=int(rows[0][0]) == at), case)

    async def reports_in_hour(self, guild_id: int, reporter_id: int, now: datetime) -> int:
        """How many reports the member made in the server in the hour before `now`."""
        ((count,),) = await self.read(
            "SELECT count(*) FROM moderation_reports WHERE guild_id = ? AND reporter_id = ? AND reported_at > ?",
            (guild_id, reporter_id, to_ms(now - _HOUR)),
        )
        return int(count)

    async def moderation_case(self, case_id: int) -> ModerationCase | None:
        return await self._case_where("c.id = ?", (case_id,))

    async def moderation_cases(
        self, guild_id: int, *, member_id: int | None = None, limit: int = 25
    ) -> list[ModerationCase]:
        """The server's latest cases, newest first: every one, or those about `member_id` or reported by them."""
        sql = f"SELECT {_CASE_COLUMNS} FROM moderation_cases AS c WHERE c.guild_id = ?"
        params: tuple[int, ...] = (guild_id,)
        if member_id is not None:
            sql += (
                " AND (c.author_id = ? OR EXISTS (SELECT 1 FROM moderation_reports AS m"
                " WHERE m.message_id = c.message_id AND m.reporter_id = ?))"
            )
            params += (member_id, member_id)
        rows = await self.read(f"{sql} ORDER BY c.opened_at DESC, c.id DESC LIMIT ?", (*params, limit))
        return [_case(row) for row in rows]

    async def case_reports(self, case_id: int) -> list[CaseReport]:
        """The reports in a case, first first."""
        rows = await self.read(
            "SELECT c.id, r.reporter_id, r.reason, r.reported_at FROM moderation_reports AS r"
            " JOIN moderation_cases AS c ON c.message_id = r.message_id WHERE c.id = ? ORDER BY r.reported_at",
            (case_id,),
        )
        return [_report(row) for row in rows]

    async def member_reports(self, guild_id: int, member_id: int) -> list[CaseReport]:
        """The reports the member made in the server, first first."""
        rows = await self.read(
            "SELECT c.id, r.reporter_id, r.reason, r.reported_at FROM moderation_reports AS r"
            " JOIN moderation_cases AS c ON c.message_id = r.message_id"
            " WHERE r.guild_id = ? AND r.reporter_id = ? ORDER BY r.reported_at",
            (guild_id, member_id),
        )
        return [_report(row) for row in rows]

    async def assess_case(self, case_id: int, rule: str, confidence: float, summary: str) -> None:
        """Keep the model's reading of an open case (a closed case keeps none); returns once it is committed."""
        self._enqueue(_ASSESS, (rule, confidence, summary, case_id))
        await self.flush()

    async def set_case_card(self, case_id: int, channel_id: int, message_id: int) -> None:
        """Keep where the case's card was posted; returns once it is committed."""
        self._enqueue(_SET_CARD, (channel_id, message_id, case_id))
        await self.flush()

    async def close_case(self, case_id: int, closed_by: int, at: datetime) -> bool:
        """Close an open case (dropping its copy of the message's text); whether this call closed it (False: it was
        closed already, or there is no such case).

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        self._enqueue(_CLOSE, (to_ms(at), closed_by, case_id))
        await self.flush()
        case = await self.moderation_case(case_id)
        if case is None:
            return False
        if case.is_open:
            raise ArchiveWriteFailed(f"case {case_id} could not be closed")
        return case.closed_by == closed_by and case.closed_at == from_ms(to_ms(at))

    async def erase_member_moderation(self, guild_id: int, member_id: int) -> None:
        """Erase the member's moderation data in the server (see `_ERASE`); returns once it is committed.

        Raises:
            ArchiveWriteFailed: some of it is still there.
        """
        self._enqueue(_ERASE, (guild_id, member_id))
        await self.flush()
        if await self.member_reports(guild_id, member_id) or await self.read(
            "SELECT 1 FROM moderation_cases WHERE guild_id = ? AND author_id = ? AND closed_at IS NOT NULL",
            (guild_id, member_id),
        ):
            raise ArchiveWriteFailed(f"member {member_id}'s moderation data could not all be erased")

    async def moderation_settings(self, guild_id: int) -> ModerationSettings:
        rows = await self.read(
            "SELECT channel_id, rules, rules_document_id, watch_words FROM moderation_settings WHERE guild_id = ?",
            (guild_id,),
        )
        if not rows:
            return ModerationSettings(guild_id)
        channel_id, rules, document_id, words = rows[0]
        watched = tuple(str(words).split("\n")) if words else ()
        return ModerationSettings(guild_id, _id(channel_id), str(rules), _id(document_id), watched)

    async def set_moderation_settings(self, settings: ModerationSettings, *, set_by: int, now: datetime) -> None:
        """Store a server's moderation settings; returns once they are committed.

        Raises:
            ArchiveWriteFailed: the writer could not commit them.
        """
        s = settings
        params = (s.guild_id, s.channel_id, s.rules, s.rules_document_id, "\n".join(s.watch_words), set_by, to_ms(now))
        self._enqueue(_SET_SETTINGS, params)
        await self.flush()
        if await self.moderation_settings(s.guild_id) != s:
            raise ArchiveWriteFailed(f"the moderation settings of server {s.guild_id} could not be stored")

    async def set_watched(self, channel_id: int, guild_id: int, watched: bool, *, set_by: int, now: datetime) -> None:
        """Store whether the channel's new messages are screened; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        if watched:
            self._enqueue(_WATCH, (channel_id, guild_id, set_by, to_ms(now)))
        else:
            self._enqueue(_UNWATCH, (channel_id,))
        await self.flush()
        if (channel_id in await self.watched_channels(guild_id)) != watched:
            raise ArchiveWriteFailed(f"the watch list of channel {channel_id} could not be stored")

    async def watched_channels(self, guild_id: int | None = None) -> dict[int, int]:
        """The channels screened, with their servers': every server's, or one's."""
        sql = "SELECT channel_id, guild_id FROM moderation_watch"
        rows = await (self.read(sql) if guild_id is None else self.read(f"{sql} WHERE guild_id = ?", (guild_id,)))
        return {int(channel_id): int(guild) for channel_id, guild in rows}

    def add_screening_tokens(self, guild_id: int, day: int, tokens: int) -> None:
        """Count `tokens` spent screening the server's messages on `day` (days since 1970-01-01, UTC)."""
        self._enqueue(_SCREENED, (guild_id, day, tokens))

    async def screening_tokens(self, guild_id: int, day: int) -> int:
        rows = await self.read("SELECT tokens FROM screening_usage WHERE guild_id = ? AND day = ?", (guild_id, day))
        return int(rows[0][0]) if rows else 0

    async def rules_document(self, guild_id: int, document_id: int) -> str | None:
        """The text of the server's knowledge base document marked as the rules, its sections in order under their
        headings; None if the server has no such document (it was removed)."""
        rows = await self.read(
            "SELECT s.heading, s.text FROM knowledge_sections AS s JOIN knowledge_documents AS d"
            " ON d.id = s.document_id WHERE d.guild_id = ? AND d.id = ? ORDER BY s.position",
            (guild_id, document_id),
        )
        if not rows:
            return None
        return "\n\n".join(f"{heading}\n{text}" if heading else str(text) for heading, text in rows)

    async def _case_where(self, condition: str, params: tuple[Any, ...]) -> ModerationCase | None:
        rows = await self.read(f"SELECT {_CASE_COLUMNS} FROM moderation_cases AS c WHERE {condition}", params)
        return next((_case(row) for row in rows), None)


def _outcome(case: ModerationCase, new_id: int, *, fresh: bool) -> str:
    if not case.is_open:
        return "reviewed"
    if case.id == new_id:
        return "opened"
    return "joined" if fresh else "repeated"


def _action(row: Sequence[Any]) -> ModerationAction:
    guild, channel, action, actor, requested_by, member, message, detail, case_id, at = row
    return ModerationAction(
        int(guild), int(channel), str(action), int(actor), _id(requested_by), _id(member), _id(message), str(detail),
        _id(case_id), from_ms(at),
    )  # fmt: skip


def _case(row: Sequence[Any]) -> ModerationCase:
    (case_id, guild, channel, message, author, content, source, opened, reporters, rule, confidence, summary,
     card_channel, card_message, closed_at, closed_by) = row  # fmt: skip
    return ModerationCase(
        int(case_id), int(guild), int(channel), int(message), int(author), str(content), str(source), from_ms(opened),
        int(reporters), str(rule), float(confidence), str(summary), _id(card_channel), _id(card_message),
        None if closed_at is None else from_ms(closed_at), _id(closed_by),
    )  # fmt: skip


def _report(row: Sequence[Any]) -> CaseReport:
    case_id, reporter, reason, at = row
    return CaseReport(int(case_id), int(reporter), str(reason), from_ms(at))


def _id(value: Any) -> int | None:
    return None if value is None else int(value)
