"""Budgets for the text the archive keeps from members' files, the same on both backends.

Text read from files (text files, PDFs, transcripts) is archived and indexed without anyone asking Parley
anything, so without a bound a member could fill the disk by posting files. Each UTC day a channel and a
member (all channels together) may have at most so many bytes of it kept; a file past either budget keeps
its name, type and size, and in place of its text a note saying why, which is what search and the model see.

The day is the file's own: Discord attachment ids are snowflakes holding the moment of the upload
(https://discord.com/developers/docs/reference#snowflakes), so a day's files are one range of the
attachments' primary key, read without another index, and files archived late (catch-up) count on the day
they were posted. Days are UTC, as for the token budgets. Each backend's writer asks this module per file,
inside the batch's transaction, so within a process the budget is exact; processes sharing a Postgres
database take turns at a day's files (a transaction lock per day, archive/postgres.py's count claims), so it
is exact across them too.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

from archive.snowflakes import DISCORD_EPOCH_MS, SNOWFLAKE_TIMESTAMP_SHIFT, snowflake_ms

logger = logging.getLogger(__name__)

_MS_PER_DAY = 86_400_000
# Budgets whose refusal has been logged, so a member posting a hundred files writes one log line, not a hundred.
_LOGGED_KEPT = 4096

CHANNEL_OVER = "(text not archived: this channel's file text for the day is over its budget)"
MEMBER_OVER = "(text not archived: its sender's file text for the day is over their budget)"


@dataclass(frozen=True, slots=True)
class FileTextBudget:
    """UTF-8 bytes of file text kept per UTC day in one channel, and from one member; 0 means no limit."""

    channel_bytes: int
    member_bytes: int


class FileTextUsage(NamedTuple):
    """Who shared a file, and the bytes of file text already kept on its day in its channel and from its sender
    (the file's own text left out, so storing it again counts it once)."""

    channel_id: int
    member_id: int
    channel_bytes: int
    member_bytes: int


def day_of(attachment_id: int) -> tuple[int, int]:
    """The lowest and highest snowflake of the UTC day `attachment_id` was made on."""
    made_ms = snowflake_ms(attachment_id)
    start_ms = made_ms - made_ms % _MS_PER_DAY
    low = max(start_ms - DISCORD_EPOCH_MS, 0) << SNOWFLAKE_TIMESTAMP_SHIFT
    high = ((start_ms + _MS_PER_DAY - DISCORD_EPOCH_MS) << SNOWFLAKE_TIMESTAMP_SHIFT) - 1
    return low, high


class FileTextGate:
    """What a backend's writer stores as a file's text: the text when it fits both budgets, else the note."""

    def __init__(self, budget: FileTextBudget | None) -> None:
        self.budget = budget
        self._logged: OrderedDict[tuple[str, int, int], None] = OrderedDict()

    def admitted(self, attachment_id: int, text: str, usage: FileTextUsage) -> str:
        """`text`, or the note saying which budget it would go over (logged once per channel or member and day)."""
        if self.budget is None:
            return text
        size = len(text.encode())
        member_budget, channel_budget = self.budget.member_bytes, self.budget.channel_bytes
        if member_budget and usage.member_bytes + size > member_budget:
            self._log_once("member", usage.member_id, attachment_id, size, member_budget)
            return MEMBER_OVER
        if channel_budget and usage.channel_bytes + size > channel_budget:
            self._log_once("channel", usage.channel_id, attachment_id, size, channel_budget)
            return CHANNEL_OVER
        return text

    def _log_once(self, scope: str, scope_id: int, attachment_id: int, size: int, budget: int) -> None:
        key = (scope, scope_id, day_of(attachment_id)[0])
        if key in self._logged:
            return
        self._logged[key] = None
        if len(self._logged) > _LOGGED_KEPT:
            self._logged.popitem(last=False)
        logger.warning(
            "archive: the text of attachment %s (%d bytes) is not kept: %s %s is over its daily budget of %d bytes"
            " of file text (ARCHIVE_FILE_TEXT_%s_BYTES); further files refused by it today are not logged",
            attachment_id,
            size,
            scope,
            scope_id,
            budget,
            scope.upper(),
        )
