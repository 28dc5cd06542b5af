"""A member's part of the moderation log in a server, as their export shows it (docs/limits-and-privacy.md,
"Moderation cases"): the reports they made, the cases about them, and the actions they took, asked for or were the
target of. Who reported them, and who acted on them, is other members' data: it is left out."""

from __future__ import annotations

from typing import Any

from archive import ModerationLog
from records import CaseReport, ModerationAction, ModerationCase

# An export's cases and actions, at most: a member's moderation history is far shorter.
EXPORTED_AT_MOST = 10_000


async def exported_moderation(archive: ModerationLog, guild_id: int, member_id: int) -> dict[str, Any]:
    """The member's reports, the cases about them (their message's text while a case is open), and the actions
    involving them."""
    cases = await archive.moderation_cases(guild_id, member_id=member_id, limit=EXPORTED_AT_MOST)
    actions = await archive.moderation_actions(guild_id, member_id=member_id, limit=EXPORTED_AT_MOST)
    return {
        "reports_made": [_report(report) for report in await archive.member_reports(guild_id, member_id)],
        "cases_about_you": [_case(case) for case in cases if case.author_id == member_id],
        "moderation_actions": [_action(action, member_id) for action in actions],
    }


def _report(report: CaseReport) -> dict[str, Any]:
    return {"case_id": str(report.case_id), "reason": report.reason, "reported_at": report.at.isoformat()}


def _case(case: ModerationCase) -> dict[str, Any]:
    return {
        "id": str(case.id),
        "channel_id": str(case.channel_id),
        "message_id": str(case.message_id),
        "message_text": case.content if case.is_open else None,
        "source": case.source,
        "reports": case.reporters,
        "rule": case.rule,
        "confidence": case.confidence,
        "summary": case.summary,
        "opened_at": case.opened_at.isoformat(),
        "closed_at": None if case.closed_at is None else case.closed_at.isoformat(),
    }


def _action(action: ModerationAction, member_id: int) -> dict[str, Any]:
    return {
        "action": action.action,
        "channel_id": str(action.channel_id),
        "case_id": None if action.case_id is None else str(action.case_id),
        "detail": action.detail,
        "at": action.at.isoformat(),
        "taken_by_you": action.actor_id == member_id,
        "asked_by_you": action.requested_by == member_id,
        "about_you": action.target_member_id == member_id,
    }
