"""Contract tests for moderation in the archive (archive/moderation.py): the action log, reports and their cases
(one per message, the hourly limit as a count claim), closing, erasing a member's part, the settings and watch
lists; on both backends."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

from archive import Archive, ArchiveWriteFailed
from archive.knowledge_types import KnowledgeDocument, KnowledgeSection
from archive.null import NULL_ARCHIVE
from records import MessageReport, ModerationAction, ModerationSettings
from tests.support.archive_contract_support import CHANNEL, GUILD, NOW

ALICE, BOB, CAROL, MOD = 100, 200, 300, 900
OTHER_GUILD = 11
LIMIT = 5


def action(name: str, *, actor: int = MOD, minutes: int = 0, **fields: object) -> ModerationAction:
    base = ModerationAction(GUILD, CHANNEL, name, actor, None, None, None, "", None, NOW + timedelta(minutes=minutes))
    return replace(base, **fields)  # type: ignore[arg-type]


def report(message_id: int, reporter: int | None = ALICE, *, author: int = BOB, minutes: int = 0) -> MessageReport:
    at = NOW + timedelta(minutes=minutes)
    return MessageReport(GUILD, CHANNEL, message_id, author, f"text of {message_id}", reporter, "rude", at)


async def test_actions_are_kept_and_listed_newest_first_by_member(archive: Archive) -> None:
    """Every field comes back; a member's list holds what they took, asked for or were the target of."""
    pinned = action("pin", requested_by=ALICE, target_message_id=55, detail="message 55", minutes=1)
    timed_out = action("timeout", target_member_id=BOB, detail="1 hour", case_id=7, minutes=2)
    first = await archive.record_action(pinned)
    second = await archive.record_action(timed_out)
    await archive.record_action(replace(pinned, guild_id=OTHER_GUILD))
    assert second > first

    assert await archive.moderation_actions(GUILD) == [timed_out, pinned]
    assert await archive.moderation_actions(GUILD, member_id=ALICE) == [pinned]
    assert await archive.moderation_actions(GUILD, member_id=BOB) == [timed_out]
    assert await archive.moderation_actions(GUILD, member_id=MOD, limit=1) == [timed_out]
    assert await archive.moderation_actions(GUILD, member_id=CAROL) == []


async def test_reports_of_one_message_make_one_case_counting_reporters(archive: Archive) -> None:
    opened = await archive.report_message(report(1), per_hour=LIMIT)
    assert opened.outcome == "opened" and opened.case is not None
    case = opened.case
    assert (case.message_id, case.author_id, case.content, case.source, case.reporters) == (1, BOB, "text of 1",
                                                                                           "report", 1)  # fmt: skip
    again = await archive.report_message(report(1, minutes=1), per_hour=LIMIT)
    joined = await archive.report_message(report(1, CAROL, minutes=2), per_hour=LIMIT)
    assert (again.outcome, joined.outcome) == ("repeated", "joined")
    assert joined.case is not None and joined.case.id == case.id and joined.case.reporters == 2
    assert [r.reporter_id for r in await archive.case_reports(case.id)] == [ALICE, CAROL]
    assert len(await archive.moderation_cases(GUILD)) == 1


async def test_racing_reports_of_one_message_make_one_case(archive: Archive) -> None:
    filed = await asyncio.gather(*(archive.report_message(report(1, member), per_hour=LIMIT) for member in (1, 2, 3)))
    assert sorted(f.outcome for f in filed) == ["joined", "joined", "opened"]
    assert {f.case.id for f in filed if f.case} == {filed[0].case.id if filed[0].case else 0}
    (case,) = await archive.moderation_cases(GUILD)
    assert case.reporters == 3


async def test_reports_past_the_hourly_limit_are_refused_even_racing(archive: Archive) -> None:
    """The limit is a count claim: of racing reports only the limit's worth count, and no case is opened for the
    rest; an hour later the member may report again."""
    filed = await asyncio.gather(*(archive.report_message(report(m), per_hour=LIMIT) for m in range(1, 9)))
    assert sorted(f.outcome for f in filed).count("opened") == LIMIT
    assert [f.case for f in filed if f.outcome == "limited"] == [None] * 3
    assert len(await archive.moderation_cases(GUILD)) == LIMIT
    assert await archive.reports_in_hour(GUILD, ALICE, NOW + timedelta(minutes=1)) == LIMIT
    assert (await archive.report_message(report(20, minutes=61), per_hour=LIMIT)).outcome == "opened"
    assert (await archive.report_message(report(21, CAROL), per_hour=LIMIT)).outcome == "opened"


async def test_a_closed_case_keeps_no_text_and_takes_no_more_reports(archive: Archive) -> None:
    filed = await archive.report_message(report(1), per_hour=LIMIT)
    assert filed.case is not None
    case_id = filed.case.id
    await archive.assess_case(case_id, "No insults", 0.8, "calls someone an idiot")
    await archive.set_case_card(case_id, 77, 88)
    assessed = await archive.moderation_case(case_id)
    assert assessed is not None
    assert (assessed.rule, assessed.confidence, assessed.summary) == ("No insults", 0.8, "calls someone an idiot")
    assert (assessed.card_channel_id, assessed.card_message_id) == (77, 88)

    assert await archive.close_case(case_id, MOD, NOW)
    assert not await archive.close_case(case_id, CAROL, NOW)  # closed once, by the first
    closed = await archive.moderation_case(case_id)
    assert closed is not None and not closed.is_open
    assert (closed.content, closed.summary, closed.rule, closed.closed_by) == ("", "", "No insults", MOD)
    assert (await archive.report_message(report(1, CAROL), per_hour=LIMIT)).outcome == "reviewed"
    assert closed.reporters == 1 and not await archive.close_case(999, MOD, NOW)


async def test_a_watch_flag_opens_a_case_without_a_reporter(archive: Archive) -> None:
    flagged = await archive.report_message(report(1, None), per_hour=LIMIT)
    assert flagged.outcome == "opened" and flagged.case is not None
    assert (flagged.case.source, flagged.case.reporters) == ("watch", 0)
    joined = await archive.report_message(report(1), per_hour=LIMIT)
    assert joined.outcome == "joined" and joined.case is not None and joined.case.reporters == 1


async def test_cases_are_listed_for_the_member_reported_and_the_reporter(archive: Archive) -> None:
    about_bob = (await archive.report_message(report(1), per_hour=LIMIT)).case
    about_alice = (await archive.report_message(report(2, BOB, author=ALICE), per_hour=LIMIT)).case
    assert about_bob and about_alice
    assert [c.id for c in await archive.moderation_cases(GUILD, member_id=ALICE)] == [about_alice.id, about_bob.id]
    assert [c.id for c in await archive.moderation_cases(GUILD, member_id=CAROL)] == []
    assert [r.case_id for r in await archive.member_reports(GUILD, ALICE)] == [about_bob.id]


async def test_erasing_a_member_takes_their_reports_and_the_closed_cases_about_them(archive: Archive) -> None:
    """Their reports go; closed cases about them go with their actions; an open case about them stays (its text too)
    until it is closed; an action they asked for forgets who asked; what they did as staff stays."""
    reported_by_alice = (await archive.report_message(report(1, ALICE, author=CAROL), per_hour=LIMIT)).case
    open_about_alice = (await archive.report_message(report(2, BOB, author=ALICE), per_hour=LIMIT)).case
    closed_about_alice = (await archive.report_message(report(3, BOB, author=ALICE), per_hour=LIMIT)).case
    assert reported_by_alice and open_about_alice and closed_about_alice
    await archive.close_case(closed_about_alice.id, MOD, NOW)
    await archive.record_action(action("warn", target_member_id=ALICE, case_id=closed_about_alice.id))
    await archive.record_action(action("timeout", target_member_id=ALICE, case_id=open_about_alice.id))
    await archive.record_action(action("pin", requested_by=ALICE, target_message_id=9))
    await archive.record_action(action("delete", actor=ALICE, target_message_id=10))

    await archive.erase_member_moderation(GUILD, ALICE)

    assert await archive.member_reports(GUILD, ALICE) == []
    left = await archive.moderation_case(reported_by_alice.id)
    assert left is not None and left.reporters == 0
    assert await archive.moderation_case(closed_about_alice.id) is None
    still_open = await archive.moderation_case(open_about_alice.id)
    assert still_open is not None and still_open.content == "text of 2"
    kept = await archive.moderation_actions(GUILD)
    assert sorted(a.action for a in kept) == ["delete", "pin", "timeout"]
    assert [a.requested_by for a in kept if a.action == "pin"] == [None]


async def test_settings_and_watch_lists_are_stored_and_go_with_their_server(archive: Archive) -> None:
    assert await archive.moderation_settings(GUILD) == ModerationSettings(GUILD)
    settings = ModerationSettings(GUILD, 77, "1. Be kind.\n2. No spam.", 5, ("scam", "free nitro"))
    await archive.set_moderation_settings(settings, set_by=MOD, now=NOW)
    assert await archive.moderation_settings(GUILD) == settings
    await archive.set_watched(CHANNEL, GUILD, True, set_by=MOD, now=NOW)
    await archive.set_watched(5, OTHER_GUILD, True, set_by=MOD, now=NOW)
    assert await archive.watched_channels(GUILD) == {CHANNEL: GUILD}
    await archive.set_watched(CHANNEL, GUILD, False, set_by=MOD, now=NOW)
    assert await archive.watched_channels() == {5: OTHER_GUILD}
    archive.add_screening_tokens(GUILD, 100, 40)
    archive.add_screening_tokens(GUILD, 100, 2)
    await archive.flush()
    assert await archive.screening_tokens(GUILD, 100) == 42 and await archive.screening_tokens(GUILD, 101) == 0

    await archive.report_message(report(1), per_hour=LIMIT)
    await archive.record_action(action("pin"))
    archive.delete_guild(GUILD)
    await archive.flush()
    assert await archive.moderation_settings(GUILD) == ModerationSettings(GUILD)
    assert await archive.moderation_cases(GUILD) == [] and await archive.moderation_actions(GUILD) == []
    assert await archive.screening_tokens(GUILD, 100) == 0


async def test_the_rules_document_is_read_whole_in_the_server_only(archive: Archive) -> None:
    sections = [KnowledgeSection("Rules > Kindness", "Be kind."), KnowledgeSection("", "No spam.")]
    added = await archive.add_knowledge(KnowledgeDocument(GUILD, "file:rules.md", "Rules", sections, MOD, NOW))
    assert await archive.rules_document(GUILD, added.document_id) == "Rules > Kindness\nBe kind.\n\nNo spam."
    assert await archive.rules_document(OTHER_GUILD, added.document_id) is None


async def test_the_null_archive_keeps_no_case() -> None:
    try:
        await NULL_ARCHIVE.report_message(report(1), per_hour=LIMIT)
    except ArchiveWriteFailed:
        pass
    else:
        raise AssertionError("the null archive opened a case")
    assert await NULL_ARCHIVE.moderation_cases(GUILD) == [] and await NULL_ARCHIVE.moderation_actions(GUILD) == []
