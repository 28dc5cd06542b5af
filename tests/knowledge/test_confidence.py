"""The confidence gate (knowledge/confidence.py) over the default search: it answers a question the documents
answer and refuses one they do not, or one asked of a server with no documents."""

from __future__ import annotations

from datetime import UTC, datetime

from archive import Archive
from archive.knowledge import KnowledgeDocument, KnowledgeSection
from config import Settings
from knowledge.base import KnowledgeBase
from knowledge.confidence import Evidence, answers, confidence
from knowledge.vectors import open_section_vectors

GUILD, ADMIN = 10, 500
NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
THRESHOLD = float(Settings.model_fields["knowledge_answer_threshold"].default)
HANDBOOK = [
    KnowledgeSection("Trash > Restore a file", "Restore a specific file from the trash: `trash restore path/to/file`"),
    KnowledgeSection("Trash > Empty", "Empty the trash: `trash empty`"),
    KnowledgeSection(
        "tcpdump > Capture a host", "Capture the traffic from or to a host: `tcpdump host www.example.com`"
    ),
    KnowledgeSection("tar > Extract", "Extract a tar archive into the current directory: `tar xf archive.tar`"),
]


async def knowledge_with_handbook(archive: Archive) -> KnowledgeBase:
    vectors = await open_section_vectors(archive, None, timeout=5)
    assert vectors is not None
    knowledge = KnowledgeBase(archive, vectors)
    await knowledge.add(KnowledgeDocument(GUILD, "file:handbook.md", "Handbook", HANDBOOK, ADMIN, NOW))
    return knowledge


async def test_the_gate_answers_a_question_the_documents_answer(archive: Archive) -> None:
    knowledge = await knowledge_with_handbook(archive)
    consulted = await knowledge.consult(GUILD, "how do I restore a file from the trash?", channel_ids=())
    assert consulted.hits[0].heading == "Trash > Restore a file"
    assert answers(consulted.evidence, THRESHOLD), consulted.evidence


async def test_the_gate_refuses_an_unrelated_question_and_an_empty_result(archive: Archive) -> None:
    knowledge = await knowledge_with_handbook(archive)
    unrelated = await knowledge.consult(GUILD, "how do I get a refund for a game I bought?", channel_ids=())
    assert not answers(unrelated.evidence, THRESHOLD), unrelated.evidence
    nothing = await knowledge.consult(GUILD + 1, "how do I restore a file from the trash?", channel_ids=())
    assert nothing.hits == [] and nothing.evidence == Evidence(0.0, 0.0)
    assert not answers(nothing.evidence, 0.0)


def test_confidence_adds_the_similarity_and_the_weighted_text_score() -> None:
    assert confidence(Evidence(0.5, 20.0)) > confidence(Evidence(0.5, 0.0)) > confidence(Evidence(0.4, 0.0))
    assert confidence(Evidence(0.5, -3.0)) == confidence(Evidence(0.5, 0.0))
    assert answers(Evidence(0.8, 0.0), 0.74) and not answers(Evidence(0.74, 0.0), 0.74)
