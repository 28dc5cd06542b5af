"""Other bots and webhooks: which automated messages may make Parley answer."""

from __future__ import annotations

from collections import OrderedDict

from deciding.journal import JOURNAL_MAX_CHANNELS
from records import Decision

BOT_NOT_LISTED = Decision(False, "other_bot", "gate")
BOT_LOOP = Decision(False, "bot_loop", "gate")


class BotGate:
    """Which automated messages may make Parley answer: allow-listed bots and webhooks, a few turns at a time.

    A bot, webhook or system author never triggers an answer unless its id is allow-listed. Even
    then, two bots that answer each other's mentions would go on forever, so after `max_exchanges`
    admitted triggers in a channel without a human message in between, the rest are refused.
    """

    def __init__(
        self, allowed_ids: frozenset[int], max_exchanges: int, *, max_channels: int = JOURNAL_MAX_CHANNELS
    ) -> None:
        self.allowed_ids = allowed_ids
        self.max_exchanges = max_exchanges
        self.max_channels = max_channels
        # Bot triggers admitted per channel since its last human message; only channels with bot traffic.
        self._exchanges: OrderedDict[int, int] = OrderedDict()

    def human_spoke(self, channel_id: int) -> None:
        self._exchanges.pop(channel_id, None)

    def refusal(self, author_id: int, channel_id: int) -> Decision | None:
        """Why an automated message addressed to Parley may not make it answer; None admits it, counting one turn."""
        if author_id not in self.allowed_ids:
            return BOT_NOT_LISTED
        exchanges = self._exchanges.pop(channel_id, 0)
        if exchanges >= self.max_exchanges:
            self._exchanges[channel_id] = exchanges
            return BOT_LOOP
        self._exchanges[channel_id] = exchanges + 1
        if len(self._exchanges) > self.max_channels:
            self._exchanges.popitem(last=False)
        return None
