"""Admission: who may make Parley call a model, and when.

The bot gate (other bots and webhooks), each member's rate, each channel's turn and line of waiting mentions,
the server's daily token budget: every model call (an answer, a Regenerate, the judge, a summary) is admitted
by one `Gatekeeper`, so no entry point has a check of its own to forget.
"""
