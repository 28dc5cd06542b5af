"""Deciding whether Parley answers: the decider's tiers, the learned follow-up tier, the decisions kept."""
