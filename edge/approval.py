"""Asking an answer's asker to approve a tool call: a prompt with Approve and Deny buttons in the answer's channel.

Which calls wait is tools/approval.py's; this is the Discord side of its `Approver`. The buttons are persistent
(discord.py's `DynamicItem`, as the Stop button is, after discord.py's examples/views/persistent.py and
dynamic_counter.py): their custom id carries the choice, the asker and the request, so a press after a restart is
told the request is over instead of failing. Only the asker's press counts; anyone else's is refused privately and
changes nothing. No press within APPROVAL_TIMEOUT_SECONDS denies the call.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import discord

from edge.streaming import Deliverer, Outlet
from tools.approval import ApprovalRequest, Verdict

log = logging.getLogger("parley.approval")

Choice = Literal["approve", "deny"]
APPROVE: Choice = "approve"
DENY: Choice = "deny"
NOT_YOURS = "Only the person who asked can approve or deny this."
NO_LONGER_WAITING = "This request is no longer waiting for an answer; nothing changed."
# What the prompt ends with once decided, by verdict; its buttons go.
CLOSING_NOTES = {
    Verdict.APPROVED: "**Approved**: running it.",
    Verdict.DENIED: "**Denied**: not run.",
    Verdict.TIMED_OUT: "**Not approved in time**: not run.",
}
# What the prompt ends with when its answer was stopped (or Parley shut down) while it waited.
STOPPED_NOTE = "**Stopped**: not run."
_ARGUMENTS_FOLLOW = " It may change things"
_PROMPT = """\
{mention}May I run `{tool}` to answer this? It may change things, so it waits for your approval. Its arguments:
```json
{arguments}
```
Approve or deny within {seconds} seconds; no answer means no."""


@dataclass
class _Waiting:
    asker_id: int
    decided: asyncio.Future[Verdict]


class ApprovalPrompts:
    """The approval prompts of a client that are waiting for a press, by request id."""

    def __init__(self, timeout_seconds: float, delivery: Deliverer) -> None:
        self.timeout_seconds = timeout_seconds
        # Prompts are posted and closed like an answer's posts: retried under the delivery deadline.
        self.delivery = delivery
        self._waiting: dict[str, _Waiting] = {}

    def for_answer(self, asker: discord.abc.User, outlet: Outlet) -> AnswerApprover:
        """The `tools.approval.Approver` of the answer to `asker`, going into `outlet`."""
        return AnswerApprover(self, asker, outlet)

    async def ask(self, asker: discord.abc.User, outlet: Outlet, request: ApprovalRequest) -> Verdict:
        """Post the prompt for `request` and wait for the asker's press, at most `timeout_seconds`."""
        request_id = secrets.token_hex(8)
        decided: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = _Waiting(asker.id, decided)
        try:
            post = await self._post(asker, outlet, request, request_id)
            if post is None:
                verdict = Verdict.UNASKED
            else:
                verdict = await self._decided(post, decided)
        finally:
            del self._waiting[request_id]
        log.info(
            "tool call %s in channel %s: %s for user %s",
            request.tool_name,
            post.channel.id if post is not None else "?",
            verdict.value,
            asker.id,
            extra={"tool": request.tool_name, "requester_id": asker.id, "approval": verdict.value},
        )
        return verdict

    async def _decided(self, post: discord.Message, decided: asyncio.Future[Verdict]) -> Verdict:
        """The asker's verdict; TIMED_OUT once `timeout_seconds` pass. The prompt says so if it was not pressed."""
        try:
            return await asyncio.wait_for(decided, self.timeout_seconds)
        except TimeoutError:
            await self._close(post, CLOSING_NOTES[Verdict.TIMED_OUT])
            return Verdict.TIMED_OUT
        except asyncio.CancelledError:
            await self._close(post, STOPPED_NOTE)
            raise

    async def _close(self, post: discord.Message, note: str) -> None:
        content = _closed(post.content, note)
        await self._attempt(lambda: post.edit(content=content, view=None), post.channel.id)

    async def pressed(self, interaction: discord.Interaction, choice: Choice, asker_id: int, request_id: str) -> None:
        """A press of Approve or Deny: the asker's decides the request and the prompt says so; others change nothing."""
        waiting = self._waiting.get(request_id)
        if interaction.user.id != asker_id:
            await interaction.response.send_message(NOT_YOURS, ephemeral=True)
        elif waiting is None or waiting.decided.done():
            await interaction.response.send_message(NO_LONGER_WAITING, ephemeral=True)
        else:
            verdict = Verdict.APPROVED if choice == APPROVE else Verdict.DENIED
            waiting.decided.set_result(verdict)
            content = interaction.message.content if interaction.message is not None else ""
            try:
                await interaction.response.edit_message(content=_closed(content, CLOSING_NOTES[verdict]), view=None)
            except discord.HTTPException as error:
                # The verdict stands: only the prompt still shows its buttons.
                log.warning("could not close an approval prompt: %s", error)

    async def _post(
        self, asker: discord.abc.User, outlet: Outlet, request: ApprovalRequest, request_id: str
    ) -> discord.Message | None:
        """The prompt, where the answer goes, answering the question (in a thread opened on it, naming the asker)."""
        content = _PROMPT.format(
            mention="" if outlet.replies else f"{asker.mention} ",
            tool=request.tool_name,
            # Whole, as tools.approval.shown_arguments wrote them (backticks escaped, which could close the block).
            arguments=request.arguments,
            seconds=f"{self.timeout_seconds:g}",
        )
        view = approval_view(asker.id, request_id)
        return await self._attempt(lambda: outlet.send(content, first=True, view=view), outlet.channel_id)

    async def _attempt(self, send: Callable[[], Awaitable[discord.Message]], channel_id: int) -> discord.Message | None:
        try:
            return await self.delivery.attempt(send, f"to channel {channel_id}")
        except RuntimeError as error:  # the client closed under it
            log.warning("could not post or close an approval prompt in channel %s: %s", channel_id, error)
            return None


@dataclass(frozen=True)
class AnswerApprover:
    """A `tools.approval.Approver`: asks the asker of one answer, in the channel the answer goes to."""

    prompts: ApprovalPrompts
    asker: discord.abc.User
    outlet: Outlet

    async def ask(self, request: ApprovalRequest) -> Verdict:
        return await self.prompts.ask(self.asker, self.outlet, request)


def _closed(content: str, note: str) -> str:
    """A prompt's text once decided: which tool it asked to run, and how that ended. The arguments go: shown whole
    while the asker decided, they would otherwise stay in the channel and the archive as Parley's post, quoting
    members' words past an erasure of them (`/parley privacy erase`)."""
    asked = content.split(_ARGUMENTS_FOLLOW, 1)[0]
    return f"{asked}\n{note}"


def approval_view(asker_id: int, request_id: str) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(ApprovalButton(APPROVE, asker_id, request_id))
    view.add_item(ApprovalButton(DENY, asker_id, request_id))
    return view


class ApprovalButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]],
    template=r"parley:approval:(?P<choice>approve|deny):(?P<asker>\d+):(?P<request>[0-9a-f]+)",
):
    """Approve or Deny under an approval prompt; its custom id says which, for whom and for which request."""

    def __init__(self, choice: Choice, asker_id: int, request_id: str) -> None:
        approving = choice == APPROVE
        super().__init__(
            discord.ui.Button(
                label="Approve" if approving else "Deny",
                style=discord.ButtonStyle.success if approving else discord.ButtonStyle.danger,
                custom_id=f"parley:approval:{choice}:{asker_id}:{request_id}",
            )
        )
        self.choice: Choice = choice
        self.asker_id = asker_id
        self.request_id = request_id

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> ApprovalButton:
        choice: Choice = APPROVE if match["choice"] == APPROVE else DENY
        return cls(choice, int(match["asker"]), match["request"])

    async def callback(self, interaction: discord.Interaction) -> None:
        prompts = prompts_of(interaction.client)
        if prompts is None:
            await interaction.response.send_message(NO_LONGER_WAITING, ephemeral=True)
            return
        await prompts.pressed(interaction, self.choice, self.asker_id, self.request_id)


def prompts_of(client: discord.Client) -> ApprovalPrompts | None:
    """The client's waiting prompts: its answering part's (answering.answer.Answering.approvals)."""
    prompts = getattr(getattr(client, "answering", None), "approvals", None)
    return prompts if isinstance(prompts, ApprovalPrompts) else None
