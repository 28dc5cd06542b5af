"""Contract tests for a member's data in the archive (archive/members.py): opt-outs, what an export reads, and
erasure; on both backends."""

from __future__ import annotations

from datetime import date, timedelta

from archive import Archive, ArchivedAttachment, MemberCounts, Memory, TokenUsage
from tests.support.archive_contract_support import CHANNEL, GUILD, NOW, OTHER_CHANNEL, ids, msg

ALICE, BOB = 100, 200
OTHER_GUILD = 11
DAY = date(2025, 1, 15)


async def _fill(archive: Archive) -> None:
    """Alice and Bob talk in two channels of GUILD (Alice with a file), Alice also in another server; facts, usage
    and a summary written from Alice's messages."""
    report = ArchivedAttachment(501, "report.txt", "text/plain", 12)
    archive.add(msg(1, "alice one", author_id=ALICE, minutes_ago=10, attachments=(report,)))
    archive.add(msg(2, "bob one", author="bob", author_id=BOB, minutes_ago=9))
    archive.add(msg(3, "alice two", author_id=ALICE, minutes_ago=8, channel=OTHER_CHANNEL))
    archive.add(msg(4, "alice elsewhere", author_id=ALICE, minutes_ago=7, channel=30, guild=OTHER_GUILD))
    archive.add(msg(5, "bob two", author="bob", author_id=BOB, minutes_ago=6))
    archive.set_attachment_text(501, "quarterly numbers")
    archive.add_summary(CHANNEL, "alice and bob talked", NOW, (1, 2))
    archive.add_summary(CHANNEL, "bob alone", NOW, (5, 5))
    for usage in (
        TokenUsage(DAY, GUILD, CHANNEL, ALICE, 10, 5, model="m"),
        TokenUsage(DAY, GUILD, CHANNEL, 0, 1, 1, model="m"),
        TokenUsage(DAY, GUILD, CHANNEL, BOB, 7, 7, model="m"),
        TokenUsage(DAY - timedelta(days=1), GUILD, OTHER_CHANNEL, ALICE, 3, 2, model="m"),
        TokenUsage(DAY, OTHER_GUILD, 30, ALICE, 4, 4, model="m"),
    ):
        archive.record_usage(usage)
    await archive.flush()
    # (id, server, about, told by, source message): Bob's fact about Alice is hers to see and to erase.
    facts = ((1, GUILD, ALICE, ALICE, 1), (2, GUILD, None, ALICE, 1), (3, GUILD, ALICE, BOB, 2),
             (4, GUILD, BOB, BOB, 5), (5, OTHER_GUILD, ALICE, ALICE, 4))  # fmt: skip
    for memory_id, guild, about, said_by, source in facts:
        await archive.add_memory(Memory(memory_id, guild, CHANNEL, about, said_by, source, f"fact {memory_id}", NOW))


async def test_opt_outs_are_kept_per_server_and_member(archive: Archive) -> None:
    await archive.set_opted_out(GUILD, ALICE, True, now=NOW)
    await archive.set_opted_out(OTHER_GUILD, ALICE, True, now=NOW)
    await archive.set_opted_out(GUILD, BOB, True, now=NOW)
    await archive.set_opted_out(GUILD, ALICE, True, now=NOW + timedelta(hours=1))  # again: since stays

    assert await archive.opt_outs() == {(GUILD, ALICE): NOW, (OTHER_GUILD, ALICE): NOW, (GUILD, BOB): NOW}
    await archive.set_opted_out(GUILD, ALICE, False)
    assert await archive.opt_outs(ALICE) == {(OTHER_GUILD, ALICE): NOW}
    await archive.set_opted_out(GUILD, ALICE, False)  # opting in twice is no error
    assert await archive.opt_outs(BOB) == {(GUILD, BOB): NOW}


async def test_an_export_reads_the_members_own_data_in_the_server_only(archive: Archive) -> None:
    await _fill(archive)

    by_channel = await archive.member_message_ids(GUILD, ALICE)
    assert by_channel == {CHANNEL: [1], OTHER_CHANNEL: [3]}
    messages = await archive.messages_by_id([3, 1])
    assert [m.message_id for m in messages] == [1, 3]
    assert messages[0].attachments == (ArchivedAttachment(501, "report.txt", "text/plain", 12, "quarterly numbers"),)
    assert messages[1].attachments == ()
    assert sorted(m.id for m in await archive.member_memories(GUILD, ALICE)) == [1, 2, 3]
    usage = await archive.member_usage(GUILD, ALICE)
    assert [(u.day, u.channel_id, u.input_tokens) for u in usage] == [
        (DAY - timedelta(days=1), OTHER_CHANNEL, 3),
        (DAY, CHANNEL, 10),
    ]
    assert await archive.member_counts(GUILD, ALICE) == MemberCounts(
        messages=2, attachments=1, facts=3, usage_rows=2, summaries=1
    )
    assert await archive.member_counts(GUILD, 999) == MemberCounts(0, 0, 0, 0, 0)


async def test_erasing_a_member_leaves_others_and_the_servers_totals(archive: Archive) -> None:
    await _fill(archive)
    totals_before = sum(u.total_tokens for u in await archive.guild_usage(GUILD, DAY - timedelta(days=1), DAY))

    await archive.erase_member(GUILD, ALICE, [1, 3])

    assert await archive.member_counts(GUILD, ALICE) == MemberCounts(0, 0, 0, 0, 0)
    assert await archive.member_message_ids(GUILD, ALICE) == {}
    assert [m.content for m in await archive.recent(CHANNEL)] == ["bob one", "bob two"]
    # The summary written from Alice's message is gone; Bob's own stays.
    assert [s.summary for s in await archive.summaries(CHANNEL)] == ["bob alone"]
    assert [m.id for m in await archive.member_memories(GUILD, BOB)] == [4]
    # Her tokens are the server's still, under no one.
    usage = await archive.guild_usage(GUILD, DAY - timedelta(days=1), DAY)
    assert sum(u.total_tokens for u in usage) == totals_before
    assert {u.member_id for u in usage} == {0, BOB}
    assert {(u.channel_id, u.input_tokens) for u in usage if u.member_id == 0} == {(CHANNEL, 11), (OTHER_CHANNEL, 3)}
    # Nothing of her in the other server was touched.
    assert await archive.member_counts(OTHER_GUILD, ALICE) == MemberCounts(1, 0, 1, 1, 0)


async def test_the_servers_channels_with_saved_conversations(archive: Archive) -> None:
    for channel, guild in ((CHANNEL, GUILD), (OTHER_CHANNEL, GUILD), (30, OTHER_GUILD)):
        for name in ("one", "two"):
            await archive.save_snapshot(
                channel_id=channel, name=name, guild_id=guild, saved_by=BOB, saved_at=NOW, history="[]"
            )
    assert await archive.snapshot_channels(GUILD) == [CHANNEL, OTHER_CHANNEL]
    assert await archive.snapshot_channels(999) == []


async def test_an_erasure_is_kept_per_server_moves_on_outlasts_the_erase_and_goes_with_the_server(
    archive: Archive,
) -> None:
    await _fill(archive)
    await archive.mark_erased(GUILD, ALICE, 3, now=NOW)
    await archive.mark_erased(GUILD, ALICE, 2, now=NOW)  # an older erasure never moves it back
    await archive.mark_erased(OTHER_GUILD, ALICE, 4, now=NOW)
    await archive.erase_member(GUILD, ALICE, [1, 3])
    assert await archive.erasures() == {(GUILD, ALICE): 3, (OTHER_GUILD, ALICE): 4}
    await archive.mark_erased(GUILD, ALICE, 9, now=NOW)
    assert await archive.erasures(ALICE) == {(GUILD, ALICE): 9, (OTHER_GUILD, ALICE): 4}

    archive.delete_guild(GUILD)
    await archive.flush()
    assert await archive.erasures() == {(OTHER_GUILD, ALICE): 4}


async def test_no_write_stores_what_a_member_erased_or_wrote_after_opting_out(archive: Archive) -> None:
    """The archive's one rule (archive.members.withheld) on every write of a message: adding it (again), its edit,
    its files and their text. Alice erased what she wrote up to message 3; Bob opted out after writing message 2."""
    report = ArchivedAttachment(501, "report.txt", "text/plain", 12)
    archive.add(msg(2, "bob before opting out", author="bob", author_id=BOB, attachments=(report,), minutes_ago=10))
    await archive.flush()
    await archive.mark_erased(GUILD, ALICE, 3, now=NOW)
    await archive.set_opted_out(GUILD, BOB, True, now=NOW)

    plan = ArchivedAttachment(502, "plan.txt", "text/plain", 12)
    archive.add(msg(1, "alice read back from Discord", author_id=ALICE, attachments=(plan,)))
    archive.add(msg(3, "alice read back too", author_id=ALICE))
    archive.add(msg(2, "bob's copy read back", author="bob", author_id=BOB))
    archive.add(msg(5, "bob after opting out", author="bob", author_id=BOB))
    archive.edit(2, "bob's edit after opting out", NOW)
    archive.set_attachment_text(501, "bob's file text read after opting out")
    archive.set_attachment_text(502, "alice's file text")
    archive.add(
        msg(
            6,
            "alice after erasing",
            author_id=ALICE,
            attachments=(ArchivedAttachment(503, "new.txt", "text/plain", 3),),
        )
    )
    archive.set_attachment_text(503, "alice's new file")
    archive.add(msg(7, "alice in another server", author_id=ALICE, guild=OTHER_GUILD, channel=30))
    await archive.flush()

    [bobs, new] = await archive.messages_by_id([2, 6])
    assert (bobs.content, bobs.attachments[0].text) == ("bob before opting out", "")
    assert (new.content, new.attachments[0].text) == ("alice after erasing", "alice's new file")
    assert ids(await archive.recent(CHANNEL)) == [2, 6]
    assert ids(await archive.recent(30)) == [7]


async def test_no_read_returns_what_a_member_wrote_after_opting_out(archive: Archive) -> None:
    """Were a message Alice wrote after opting out archived anyway, no read of the channel returns it; what she wrote
    before comes back from `recent` (shown as placeholders outside the archive) and from no search; elsewhere, and
    once she opts back in, her messages read as before."""
    archive.add(msg(1, "alice before", author_id=ALICE, minutes_ago=10))
    archive.add(msg(2, "bob before", author="bob", author_id=BOB, minutes_ago=9))
    archive.add(msg(3, "alice after", author_id=ALICE, minutes_ago=1))
    archive.add(msg(4, "alice after elsewhere", author_id=ALICE, minutes_ago=1, channel=30, guild=OTHER_GUILD))
    await archive.flush()
    await archive.set_opted_out(GUILD, ALICE, True, now=NOW - timedelta(minutes=5))

    assert [m.content for m in await archive.recent(CHANNEL)] == ["alice before", "bob before"]
    assert [m.content for m in await archive.search(CHANNEL, "before")] == ["bob before"]
    assert await archive.search(CHANNEL, "alice") == []
    assert [m.content for m in await archive.search(30, "alice")] == ["alice after elsewhere"]
    await archive.set_opted_out(GUILD, ALICE, False)
    assert [m.content for m in await archive.recent(CHANNEL)] == ["alice before", "bob before", "alice after"]
