"""Whether a search's result answers the question: the gate the support desk asks before answering a question
nobody addressed, where answering one the documents do not cover is the error that matters.

The score adds the two searches' own evidence for their best section: the cosine similarity of the question and
the section nearest it in meaning, and the full-text score (SQLite's bm25, weighted by `TEXT_WEIGHT`) of the
section that best matches its words. Either alone tells covered from uncovered questions poorly (a reworded
question shares few words; an unrelated one on the same subject lands near some section); together they do
better. Weight and threshold were chosen on the knowledge bench's labelled questions (bench/bench_knowledge.py,
questions the documents do not cover included), with the local WordLlama model: a provider's embedding model
or Postgres's ts_rank (on another scale than bm25) wants its own threshold, measured with the bench's
`--questions`.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TEXT_WEIGHT", "Evidence", "answers", "confidence"]

# Chosen with the threshold (KNOWLEDGE_ANSWER_THRESHOLD's default) on bench/data/knowledge_questions.jsonl: see
# docs/benchmarks.md.
TEXT_WEIGHT = 0.01


class Evidence(NamedTuple):
    """What a search found for its best sections: 0.0 where a search found nothing (or did not run)."""

    similarity: float
    text_score: float


def confidence(evidence: Evidence) -> float:
    """How strongly the documents answer the question: the higher, the surer."""
    return evidence.similarity + TEXT_WEIGHT * max(evidence.text_score, 0.0)


def answers(evidence: Evidence, threshold: float) -> bool:
    """Whether the documents answer the question, by the search's evidence: its confidence is above `threshold`
    (KNOWLEDGE_ANSWER_THRESHOLD)."""
    return confidence(evidence) > threshold
