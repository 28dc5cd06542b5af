"""What admission hands back instead of acting on it: a decision for the client to note, and a line for it to tell.

Admission sits below the client, so it posts nothing and notes nothing itself: it decides whether a member is told
(each line's "once" rule is its own) and returns what to say, where; the client's one notice path
(`answering.outcome.AnswerTail.tell`) posts it through the delivery's retries.
"""

from __future__ import annotations

from dataclasses import dataclass

import discord

from records import Decision


@dataclass(frozen=True)
class Notice:
    """A line told to the author of `message`, replying to it (in `where`, the thread opened on it, if given): why
    Parley stays quiet with them, and until when."""

    message: discord.Message
    line: str
    where: discord.Thread | None = None
    # Whether the post joins the conversation, as Parley's post to its asker: the server's budget notice does, said
    # where the answer would have been; the others are no turn of Parley's for the model to see or follow up on.
    kept: bool = False


@dataclass(frozen=True)
class Declined:
    """A message admission leaves unanswered: the decision the client notes (for `/parley why`), and the notice its
    author is told, if any."""

    decision: Decision
    notice: Notice | None = None
