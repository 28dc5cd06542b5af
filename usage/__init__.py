"""Tokens and what they cost: the day's accounting and the server budget, and the usage figures."""
