"""Moderation: members' reports of messages and the watch lists' flags become cases the moderators decide on.

The model reads a case against the server's rules and names the rule it may break (reading.py); it decides nothing.
A case card in the moderation channel (cards.py) carries the buttons, and each works only for a member who holds
the permission its action needs in the reported message's channel, and only if Parley holds it too (desk.py). The
watch lists' pre-filter (prefilter.py) decides which new messages are worth a model call (screening.py). Every case
and action is kept in the archive (archive/moderation.py).
"""
