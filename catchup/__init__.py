"""Catching a member up: what a channel said since they last looked, summarised from the archive.

Above the archive and the quoting of messages, beside the agents: `reading.py` finds the range (since a time, a
message, or the member's own last message; never before a forget), `writing.py` summarises it in chunks within a
token budget and renders the points with jump links. The command (`commands/catchup.py`) admits the member and
shows the progress.
"""
