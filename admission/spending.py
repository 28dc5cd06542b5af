"""An operation's spending: every model call of something that makes several (a catch-up's parts, a digest's, an
answer's tool rounds, a Regenerate's) asks here before it runs, so the member's tokens a day (ROLE_LIMITS) and the
server's (SERVER_TOKENS_PER_DAY) hold call by call, not only when the operation starts.

The check itself is the gatekeeper's (`Gatekeeper.call_refusal`); this keeps, per operation, the first refusal, so
the calls after it are not asked again and the member is told once, with when the budget resets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from records import Decision


class Refused(NamedTuple):
    """A request a member made by command, turned down: the decision (for `/parley why`) and the line they are told."""

    decision: Decision
    line: str


# Asked with the tokens the operation has spent but not yet counted in the day's ledger (an answer counts its
# tokens when it ends); None admits the call.
CallCheck = Callable[[int], Awaitable[Refused | None]]


class Spending:
    """One operation's model calls for a member (or, asked for by no member, for a server)."""

    def __init__(self, check: CallCheck) -> None:
        self._check = check
        # The refusal that stopped the operation, once one has: what the member is told.
        self.refused: Refused | None = None

    async def admits(self, uncounted: int = 0) -> bool:
        """Whether the operation's next model call may run; once refused, it stays refused."""
        if self.refused is None:
            self.refused = await self._check(uncounted)
        return self.refused is None

    async def stop_line(self, uncounted: int = 0) -> str | None:
        """`admits` as the answer agent asks it before each request (tools.ChatDeps.before_each_call): None admits
        the request, else the line the answer stops on."""
        return None if await self.admits(uncounted) else self.line

    @property
    def line(self) -> str | None:
        """What the member is told about the stop; None while nothing was refused."""
        return None if self.refused is None else self.refused.line
