"""Contract tests for the knowledge base's store (archive/knowledge.py): adding, replacing, listing, removing and
searching documents, per server and per readable channel; on both backends."""

from __future__ import annotations

import pytest

from archive import Archive
from archive.knowledge import KnowledgeDocument, KnowledgeDocumentInfo, KnowledgeSection, NoRoomForDocument
from archive.stores import StoreTables
from tests.support.archive_contract_support import CHANNEL, GUILD, NOW, OTHER_CHANNEL

OTHER_GUILD = 11
ADMIN = 500

HANDBOOK = (
    KnowledgeSection("Install", "Download the installer and run it."),
    KnowledgeSection("Install > Docker", "Run docker compose up; the container listens on port 8080."),
    KnowledgeSection("Backups", "Backups run nightly at 02:00 and are kept for thirty days."),
)


def handbook(source: str = "file:handbook.md", *, guild: int = GUILD, **fields: object) -> KnowledgeDocument:
    values: dict[str, object] = {"title": "Handbook", "sections": HANDBOOK, "added_by": ADMIN, "added_at": NOW}
    return KnowledgeDocument(guild, source, **(values | fields))  # type: ignore[arg-type]


async def _headings(archive: Archive, query: str, *, guild: int = GUILD, channels: tuple[int, ...] = ()) -> list[str]:
    hits = await archive.search_knowledge(guild, query, limit=5, channel_ids=channels)
    return [hit.heading for hit in hits]


async def test_an_added_document_is_listed_and_found_with_its_section(archive: Archive) -> None:
    added = await archive.add_knowledge(handbook())

    assert len(added.section_ids) == 3 and added.replaced_section_ids == []
    assert await archive.knowledge_documents(GUILD) == [
        KnowledgeDocumentInfo(added.document_id, "file:handbook.md", "Handbook", None, 3, ADMIN, NOW)
    ]
    [hit] = await archive.search_knowledge(GUILD, "which port does docker use?", limit=5, channel_ids=())
    assert (hit.document_id, hit.section_id, hit.title, hit.source) == (
        added.document_id,
        added.section_ids[1],
        "Handbook",
        "file:handbook.md",
    )
    assert hit.heading == "Install > Docker" and "port 8080" in hit.quote and hit.score > 0


async def test_search_ranks_the_section_matching_more_words_first(archive: Archive) -> None:
    await archive.add_knowledge(handbook())

    assert (await _headings(archive, "how long are backups kept nightly"))[0] == "Backups"
    assert (await _headings(archive, "install docker"))[0] == "Install > Docker"
    assert await _headings(archive, "kubernetes") == []


async def test_adding_the_same_source_replaces_the_document(archive: Archive) -> None:
    first = await archive.add_knowledge(handbook())
    second = await archive.add_knowledge(
        handbook(title="Handbook v2", sections=[KnowledgeSection("Upgrade", "Stop the service before upgrading.")])
    )

    assert second.replaced_section_ids == first.section_ids
    [info] = await archive.knowledge_documents(GUILD)
    assert (info.id, info.title, info.sections) == (second.document_id, "Handbook v2", 1)
    assert await _headings(archive, "docker") == []
    assert await _headings(archive, "upgrading") == ["Upgrade"]


async def test_removal_takes_the_document_out_of_search(archive: Archive) -> None:
    added = await archive.add_knowledge(handbook())
    kept = await archive.add_knowledge(
        handbook("file:faq.md", title="FAQ", sections=[KnowledgeSection("", "Docker images are on the hub.")])
    )

    assert await archive.remove_knowledge(OTHER_GUILD, added.document_id) is None
    assert await archive.remove_knowledge(GUILD, added.document_id) == added.section_ids
    assert await archive.remove_knowledge(GUILD, added.document_id) is None
    assert [info.id for info in await archive.knowledge_documents(GUILD)] == [kept.document_id]
    assert await _headings(archive, "docker") == [""]
    assert await archive.sections_by_id(added.section_ids, guild_id=GUILD, channel_ids=()) == []
    assert await archive.knowledge_document_id(GUILD, "file:handbook.md") is None
    assert await archive.knowledge_document_id(GUILD, "file:faq.md") == kept.document_id


async def test_a_server_never_sees_another_servers_documents(archive: Archive) -> None:
    theirs = await archive.add_knowledge(handbook(guild=OTHER_GUILD))

    assert await archive.knowledge_documents(GUILD) == [] and not await archive.has_knowledge(GUILD)
    assert await archive.has_knowledge(OTHER_GUILD)
    assert await _headings(archive, "docker") == []
    assert await archive.sections_by_id(theirs.section_ids, guild_id=GUILD, channel_ids=()) == []
    assert await _headings(archive, "docker", guild=OTHER_GUILD) == ["Install > Docker"]
    # The same source in two servers is two documents.
    ours = await archive.add_knowledge(handbook())
    assert ours.replaced_section_ids == [] and len(await archive.knowledge_documents(OTHER_GUILD)) == 1


async def test_a_channels_document_is_found_only_by_its_readers(archive: Archive) -> None:
    pin = KnowledgeSection("", "The deploy password rotates every Friday.")
    added = await archive.add_knowledge(handbook(f"pin:{CHANNEL}:99", channel_id=CHANNEL, sections=[pin]))

    assert await _headings(archive, "deploy password") == []
    assert await _headings(archive, "deploy password", channels=(OTHER_CHANNEL,)) == []
    assert await _headings(archive, "deploy password", channels=(OTHER_CHANNEL, CHANNEL)) == [""]
    assert await archive.sections_by_id(added.section_ids, guild_id=GUILD, channel_ids=(OTHER_CHANNEL,)) == []
    [hit] = await archive.sections_by_id(added.section_ids, guild_id=GUILD, channel_ids=(CHANNEL,))
    assert (hit.channel_id, hit.quote) == (CHANNEL, pin.text)


async def test_sections_by_id_keep_the_order_asked_for(archive: Archive) -> None:
    added = await archive.add_knowledge(handbook())
    wanted = [added.section_ids[2], added.section_ids[0], 10**9]

    hits = await archive.sections_by_id(wanted, guild_id=GUILD, channel_ids=())

    assert [hit.section_id for hit in hits] == wanted[:2]
    assert [hit.heading for hit in hits] == ["Backups", "Install"]


async def test_words_match_without_diacritics_or_case_and_syntax_is_plain_text(archive: Archive) -> None:
    sections = [KnowledgeSection("Café", "Le menu du CAFÉ change chaque lundi."), KnowledgeSection("Other", "x")]
    await archive.add_knowledge(handbook(sections=sections))

    assert await _headings(archive, "cafe") == ["Café"]
    # Quotes, parentheses and operators are not search syntax: the words are searched, any of them.
    assert sorted(await _headings(archive, 'menu" OR (x) & !')) == ["Café", "Other"]


async def test_a_server_parley_left_loses_its_documents(archive: Archive) -> None:
    ours = await archive.add_knowledge(handbook())
    await archive.add_knowledge(handbook(guild=OTHER_GUILD))

    archive.delete_guild(GUILD)
    await archive.flush()

    assert await archive.knowledge_documents(GUILD) == [] and await _headings(archive, "docker") == []
    assert await archive.sections_by_id(ours.section_ids, guild_id=GUILD, channel_ids=()) == []
    assert await _headings(archive, "docker", guild=OTHER_GUILD) == ["Install > Docker"]


async def test_a_new_server_wide_document_is_stored_only_under_the_bound(archive: Archive) -> None:
    """The count claim: past `most` server-wide documents a new one is refused and nothing of it stored; replacing
    one, a channel's document (a pin) and another server's still go in."""
    first = await archive.add_knowledge(handbook("file:a.md"), most=2)
    await archive.add_knowledge(handbook("file:b.md"), most=2)
    with pytest.raises(NoRoomForDocument):
        await archive.add_knowledge(handbook("file:c.md", title="Refused"), most=2)
    replaced = await archive.add_knowledge(handbook("file:a.md", title="Again"), most=2)
    await archive.add_knowledge(handbook(f"pin:{CHANNEL}:1", channel_id=CHANNEL), most=2)
    await archive.add_knowledge(handbook("file:c.md", guild=OTHER_GUILD), most=2)
    documents = await archive.knowledge_documents(GUILD)
    assert sorted(info.source for info in documents) == ["file:a.md", "file:b.md", f"pin:{CHANNEL}:1"]
    assert replaced.replaced_section_ids == first.section_ids
    assert isinstance(archive, StoreTables)
    assert await archive.read("SELECT count(*) FROM knowledge_sections") == [(3 * 4,)]  # none of the refused one's
