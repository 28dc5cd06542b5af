"""A case's card in the moderation channel: the message quoted with its jump link, who reported it and why, the
model's reading, what was done, and the buttons (Delete, Timeout 10 minutes / 1 hour / 1 day, Warn, Dismiss).

The buttons are persistent (discord.py's `DynamicItem`, as the approval buttons are): a custom id names the case and
the action, so a press after a restart still works; the template takes only the actions and durations the card
offers, so a forged custom id with any other is no button of Parley's. What a press does is actions.py's.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

import discord

from records import CaseReport, ModerationAction, ModerationCase

# The timeouts a card offers, by the seconds its custom id carries, with how the card and the log name them.
TIMEOUTS: dict[int, str] = {600: "10 minutes", 3600: "1 hour", 86400: "1 day"}
DELETE, TIMEOUT, WARN, DISMISS = "delete", "timeout", "warn", "dismiss"
QUOTE_MAX_CHARS = 1500
REASONS_SHOWN = 3
REPORTERS_SHOWN = 5
ACTIONS_SHOWN = 10
CLOSED_TEXT = "*(The message's text is not kept once a case is closed.)*"
NO_TEXT = "*(Not kept: its author opted out of Parley, or erased their data.)*"
_OPEN_COLOUR = discord.Colour.orange()
_CLOSED_COLOUR = discord.Colour.dark_grey()


def jump_url(guild_id: int, channel_id: int, message_id: int) -> str:
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


def case_embed(
    case: ModerationCase, reports: Sequence[CaseReport], actions: Sequence[ModerationAction]
) -> discord.Embed:
    """The card's embed: the message (while the case is open), who reported it and why, the reading, the actions."""
    flagged = case.source == "watch"
    embed = discord.Embed(
        title=f"Case #{case.id}: a {'flagged' if flagged else 'reported'} message",
        description=_quoted(case)
        + f"\n[Jump to the message]({jump_url(case.guild_id, case.channel_id, case.message_id)})",
        colour=_OPEN_COLOUR if case.is_open else _CLOSED_COLOUR,
        timestamp=case.opened_at,
    )
    embed.add_field(name="Author", value=f"<@{case.author_id}> in <#{case.channel_id}>", inline=True)
    if reports:
        shown = ", ".join(f"<@{report.reporter_id}>" for report in reports[:REPORTERS_SHOWN])
        more = len(reports) - REPORTERS_SHOWN
        embed.add_field(name="Reported by", value=shown + (f" and {more} more" if more > 0 else ""), inline=True)
        reasons = [" ".join(report.reason.split()) for report in reports if report.reason.strip()][:REASONS_SHOWN]
        if reasons:
            embed.add_field(name="Reasons", value="\n".join(f"• {reason}" for reason in reasons)[:1024], inline=False)
    elif flagged:
        embed.add_field(name="Flagged by", value="the watch list of this channel", inline=True)
    embed.add_field(name="Rule it may break", value=case.rule or "none named", inline=False)
    if case.rule:
        embed.add_field(name="How sure", value=f"{round(case.confidence * 100)}%", inline=True)
    if case.summary:
        embed.add_field(name="Summary", value=case.summary, inline=False)
    if actions:
        lines = [_action_line(action) for action in list(actions)[:ACTIONS_SHOWN]]
        embed.add_field(name="Done", value="\n".join(lines)[:1024], inline=False)
    embed.set_footer(text="Open" if case.is_open else "Closed")
    return embed


def _quoted(case: ModerationCase) -> str:
    if not case.is_open:
        return CLOSED_TEXT
    if not case.content.strip():
        return NO_TEXT
    text = case.content if len(case.content) <= QUOTE_MAX_CHARS else case.content[: QUOTE_MAX_CHARS - 1] + "…"
    return "\n".join(f"> {line}" for line in text.splitlines() or [""])


def _action_line(action: ModerationAction) -> str:
    done = {DELETE: "deleted the message", WARN: "warned the author", DISMISS: "closed the case"}
    what = f"timed the author out for {action.detail}" if action.action == TIMEOUT else done.get(action.action, "")
    return f"<@{action.actor_id}> {what or action.action} <t:{int(action.at.timestamp())}:R>"


def case_view(case: ModerationCase) -> discord.ui.View | None:
    """The card's buttons while the case is open; none once it is closed."""
    if not case.is_open:
        return None
    view = discord.ui.View(timeout=None)
    view.add_item(CaseButton(case.id, DELETE))
    for seconds in TIMEOUTS:
        view.add_item(CaseButton(case.id, f"{TIMEOUT}-{seconds}"))
    view.add_item(CaseButton(case.id, WARN))
    view.add_item(CaseButton(case.id, DISMISS))
    return view


def timeout_of(action: str) -> timedelta | None:
    """The duration a timeout button's action names; None for any other button."""
    kind, _, seconds = action.partition("-")
    return timedelta(seconds=int(seconds)) if kind == TIMEOUT and int(seconds) in TIMEOUTS else None


_LABELS = {DELETE: "Delete", WARN: "Warn", DISMISS: "Dismiss"}
_STYLES = {DELETE: discord.ButtonStyle.danger, DISMISS: discord.ButtonStyle.secondary}


class CaseButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]],
    template=r"parley:case:(?P<case>\d{1,20}):(?P<action>delete|warn|dismiss|timeout-(?:600|3600|86400))",
):
    """One of a case card's buttons; its custom id names the case and the action (a timeout's, its seconds)."""

    def __init__(self, case_id: int, action: str) -> None:
        duration = timeout_of(action)
        label = f"Timeout {TIMEOUTS[int(duration.total_seconds())]}" if duration is not None else _LABELS[action]
        super().__init__(
            discord.ui.Button(
                label=label,
                style=_STYLES.get(action, discord.ButtonStyle.primary),
                custom_id=f"parley:case:{case_id}:{action}",
            )
        )
        self.case_id = case_id
        self.action = action

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> CaseButton:
        return cls(int(match["case"]), match["action"])

    async def callback(self, interaction: discord.Interaction) -> None:
        # The client's moderation/actions.py `CaseActions`, which this module sits below.
        actions = getattr(interaction.client, "case_actions", None)
        pressed: Callable[[discord.Interaction, int, str], Awaitable[None]] | None = getattr(actions, "pressed", None)
        if pressed is None:
            await interaction.response.send_message("Moderation is not running here.", ephemeral=True)
            return
        await pressed(interaction, self.case_id, self.action)
