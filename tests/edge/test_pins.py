"""Pinned messages into the knowledge base (edge/pins.py): what a comparison of a channel's pins with its documents
does, and how a pin reads as a document."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from archive.knowledge_types import KnowledgeSection
from edge.pins import PinPlan, pin_sections, pin_source, pinned_message_id, plan, title_of

WRITTEN = datetime(2026, 11, 25, 23, 30, tzinfo=UTC)
CHANNEL, OTHER_CHANNEL = 10, 11


def test_new_pins_are_taken_unpinned_ones_dropped_and_edited_ones_taken_again() -> None:
    later = WRITTEN + timedelta(minutes=5)
    pinned = {1: WRITTEN, 2: later, 4: WRITTEN}
    # 2's document holds its first version; 3 was unpinned; 4's document is its version, to the millisecond.
    taken = {2: WRITTEN, 3: WRITTEN, 4: WRITTEN + timedelta(microseconds=300)}
    assert plan(pinned, taken) == PinPlan(take=[1, 2], drop=[3])
    assert plan({}, {}) == PinPlan(take=[], drop=[])


def test_a_channels_pin_documents_are_told_from_any_other_source() -> None:
    assert pin_source(CHANNEL, 123) == "pin:10:123"
    assert pinned_message_id("pin:10:123", CHANNEL) == 123
    for source in ("pin:11:123", "pin:10:", "pin:10:12x", "file:pin:10:123", "pin:100:123"):
        assert pinned_message_id(source, CHANNEL) is None, source


def test_a_pins_title_is_its_author_its_day_in_the_zone_and_its_first_line() -> None:
    paris = ZoneInfo("Europe/Paris")
    text = "\n\n## Deploy checklist\nrun the migrations first"
    assert title_of("alice", WRITTEN, text, paris) == "alice, 2026-11-26: Deploy checklist"
    assert title_of("alice", WRITTEN, text, ZoneInfo("UTC")) == "alice, 2026-11-25: Deploy checklist"
    assert title_of("bob", WRITTEN, "  \n", paris) == "bob, 2026-11-26"
    long = title_of("bob", WRITTEN, "word " * 40, paris)
    assert long.endswith("…") and len(long) == len("bob, 2026-11-26: ") + 80


def test_a_pins_sections_are_its_text_then_each_files_headed_by_the_files_name() -> None:
    runbook = "# Restarts\n\nDrain the queue first.\n\n# Upgrades\n\nOne node at a time."
    files = [("runbook.md", runbook), ("notes.txt", "Plain words.")]
    sections = pin_sections("alice, 2026-11-25: Ops", "Ops notes, see the files.", files)
    assert sections == [
        KnowledgeSection("", "Ops notes, see the files."),
        KnowledgeSection("runbook.md > Restarts", "Drain the queue first."),
        KnowledgeSection("runbook.md > Upgrades", "One node at a time."),
        KnowledgeSection("notes.txt", "Plain words."),
    ]
    assert pin_sections("bob, 2026-11-25", "  ", [("empty.txt", "")]) == []
