"""Command replies as embeds: the server's colour, fields, and Discord's embed limits kept by cutting and paging.

Discord's limits: https://discord.com/developers/docs/resources/message#embed-object-embed-limits
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import discord

TITLE_MAX = 256
DESCRIPTION_MAX = 4096
FIELDS_MAX = 25
FIELD_NAME_MAX = 256
FIELD_VALUE_MAX = 1024
FOOTER_MAX = 2048
# Over every embed of one message together, not each embed alone.
MESSAGE_EMBED_CHARS_MAX = 6000
# https://discord.com/developers/docs/resources/message#create-message-jsonform-params
EMBEDS_PER_MESSAGE = 10
# A reply's embeds, whatever its list: /parley why at its largest (25 long decisions) needs two.
REPLY_MAX_EMBEDS = 4
# Where the server gives Parley no colour of its own (no coloured role): a teal that reads on light and dark themes.
PARLEY_COLOUR = discord.Colour(0x2A9D8F)
CONTINUED = " (continued)"
# A field needs a name; this one shows none.
BLANK = "\u200b"


@dataclass(frozen=True, slots=True)
class Field:
    """One embed field: `value` may hold mentions, links and timestamps (Discord renders them there, not in names)."""

    name: str
    value: str
    inline: bool = False


def clip(text: str, limit: int) -> str:
    """`text` within `limit` characters, ending in "…" where it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def server_colour(guild: discord.Guild | None) -> discord.Colour:
    """The colour Parley's name has in the server (its top coloured role's), else Parley's own."""
    me = guild.me if guild is not None else None
    colour = me.colour if me is not None else discord.Colour.default()
    return colour if colour.value else PARLEY_COLOUR


def reply_embed(
    title: str,
    colour: discord.Colour,
    *,
    description: str = "",
    footer: str = "",
    timestamp: datetime | None = None,
) -> discord.Embed:
    """An embed's head, each part cut to its limit; Discord shows `timestamp` in each reader's own zone."""
    embed = discord.Embed(
        title=clip(title, TITLE_MAX),
        description=clip(description, DESCRIPTION_MAX) or None,
        colour=colour,
        timestamp=timestamp,
    )
    if footer:
        embed.set_footer(text=clip(footer, FOOTER_MAX))
    return embed


def lines_fields(name: str, lines: Sequence[str]) -> list[Field]:
    """`lines` under `name` in as few fields as the value limit allows; later ones are named "… (continued)"."""
    fields: list[Field] = []
    chunk: list[str] = []
    for line in (clip(line, FIELD_VALUE_MAX) for line in lines):
        if chunk and len("\n".join([*chunk, line])) > FIELD_VALUE_MAX:
            fields.append(Field(name if not fields else name + CONTINUED, "\n".join(chunk)))
            chunk = []
        chunk.append(line)
    if chunk:
        fields.append(Field(name if not fields else name + CONTINUED, "\n".join(chunk)))
    return fields


def paginate(
    head: discord.Embed, fields: Sequence[Field], *, max_embeds: int = REPLY_MAX_EMBEDS
) -> list[discord.Embed]:
    """`head` with `fields` added, spread over as many embeds as the limits need (at most `max_embeds`); what does
    not fit then is cut with a last field "… and N more"."""
    embeds = [head]
    for index, field in enumerate(fields):
        field = Field(clip(field.name, FIELD_NAME_MAX) or BLANK, clip(field.value, FIELD_VALUE_MAX), field.inline)
        last_page = len(embeds) == max_embeds
        # On the last page room is kept for the "and N more" a cut needs, so that cutting never breaks a limit.
        if not _fits(embeds[-1], field, keep_room=last_page and index < len(fields) - 1):
            if last_page:
                embeds[-1].add_field(name=BLANK, value=_more(len(fields) - index), inline=False)
                break
            embeds.append(_continuation(head))
        embeds[-1].add_field(name=field.name, value=field.value, inline=field.inline)
    return embeds


def _fits(embed: discord.Embed, field: Field, *, keep_room: bool) -> bool:
    reserved = (1, len(BLANK) + len(_more(10**9))) if keep_room else (0, 0)
    count = len(embed.fields) + 1 + reserved[0]
    size = len(embed) + len(field.name) + len(field.value) + reserved[1]
    return count <= FIELDS_MAX and size <= MESSAGE_EMBED_CHARS_MAX


def _more(count: int) -> str:
    return f"… and {count} more"


def _continuation(head: discord.Embed) -> discord.Embed:
    """A later page: the head's title marked as continued, its colour, and no description."""
    title = clip((head.title or "") + CONTINUED, TITLE_MAX)
    return discord.Embed(title=title, colour=head.colour, timestamp=head.timestamp)


def messages_of(embeds: Sequence[discord.Embed]) -> list[list[discord.Embed]]:
    """`embeds` grouped into messages: at most 10 each, and 6000 characters over a message's embeds."""
    messages: list[list[discord.Embed]] = []
    for embed in embeds:
        last = messages[-1] if messages else None
        if (
            last is None
            or len(last) == EMBEDS_PER_MESSAGE
            or sum(map(len, last)) + len(embed) > MESSAGE_EMBED_CHARS_MAX
        ):
            messages.append([embed])
        else:
            last.append(embed)
    return messages


async def send_embeds(
    interaction: discord.Interaction, embeds: Sequence[discord.Embed], *, files: Sequence[discord.File] = ()
) -> None:
    """Answer an interaction with `embeds` only its user sees, in as many posts as the limits need; `files` go with
    the first. Mentions in embeds never ping, but the reply says so anyway."""
    for number, group in enumerate(messages_of(embeds)):
        attached = list(files) if number == 0 else []
        quiet = discord.AllowedMentions.none()
        if interaction.response.is_done():
            await interaction.followup.send(embeds=group, files=attached, ephemeral=True, allowed_mentions=quiet)
        else:
            await interaction.response.send_message(
                embeds=group, files=attached, ephemeral=True, allowed_mentions=quiet
            )
