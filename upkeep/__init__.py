"""Conversation upkeep: resume, summaries, compaction, forgetting, edits and deletions, catch-up coverage."""
