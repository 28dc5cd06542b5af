"""Tests for the commands' embeds and /parley usage's chart: Discord's embed limits kept by paging and cutting,
what each reply shows, and the chart's picture."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import discord
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFont

from archive import Memory, TokenUsage
from commands.embeds import (
    EMBEDS_PER_MESSAGE,
    FIELD_NAME_MAX,
    FIELD_VALUE_MAX,
    FIELDS_MAX,
    MESSAGE_EMBED_CHARS_MAX,
    PARLEY_COLOUR,
    TITLE_MAX,
    Field,
    lines_fields,
    messages_of,
    paginate,
    reply_embed,
    server_colour,
)
from commands.memory import CHANNEL_MEMORIES_HIDDEN, memories_embeds
from commands.profile import clip_list, profile_embed
from commands.usage_chart import (
    BACKGROUND,
    CHART_MAX_CHANNELS,
    FONT_SIZE,
    HEIGHT,
    OTHER_CHANNELS,
    PALETTE,
    WIDTH,
    daily_usage,
    fit,
    panels,
    slot,
    usage_chart_png,
)
from commands.usage_report import ARCHIVE_OFF, USAGE_MAX_ROWS, usage_embeds
from profiles.channels import FIELDS, Source, Value
from usage.costs import UsageReport, cost_of

DAY = date(2026, 11, 20)
NOW = datetime(2026, 11, 20, 15, 0, tzinfo=UTC)
GUILD, CHANNEL, ME = 1, 7, 3


def row(member: int, channel: int = CHANNEL, day: date = DAY, **fields: int | str) -> TokenUsage:
    values: dict[str, Any] = {"input_tokens": 1000, "output_tokens": 100, "model": "openai:gpt-4.1-mini", **fields}
    return TokenUsage(day, GUILD, channel, member, **values)


def embed_text(embed: discord.Embed) -> str:
    fields = [f"{field.name}: {field.value}" for field in embed.fields]
    return "\n".join(filter(None, [embed.title, embed.description, *fields, embed.footer.text]))


# --- Discord's limits ---------------------------------------------------------------------------


def assert_within_limits(embeds: list[discord.Embed]) -> None:
    for embed in embeds:
        assert len(embed.title or "") <= TITLE_MAX and len(embed.fields) <= FIELDS_MAX
        assert all(len(field.name or "") <= FIELD_NAME_MAX for field in embed.fields)
        assert all(0 < len(field.value or "") <= FIELD_VALUE_MAX for field in embed.fields)
    for message in messages_of(embeds):
        assert len(message) <= EMBEDS_PER_MESSAGE and sum(map(len, message)) <= MESSAGE_EMBED_CHARS_MAX


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 2000)), max_size=120),
    max_embeds=st.integers(1, 4),
)
def test_paging_keeps_every_limit_and_counts_what_it_cuts(sizes: list[tuple[int, int]], max_embeds: int) -> None:
    """However many fields and however long, each embed and each message keeps Discord's limits; the fields come in
    order, and when they do not all fit, a last field says how many were left out."""
    head = reply_embed("t" * 300, PARLEY_COLOUR, description="d" * 5000, footer="f")
    fields = [Field(f"{index:03}" + "n" * name, "v" * value) for index, (name, value) in enumerate(sizes)]
    embeds = paginate(head, fields, max_embeds=max_embeds)
    assert_within_limits(embeds)
    assert len(embeds) <= max_embeds
    shown = [field for embed in embeds for field in embed.fields]
    kept = [field for field in shown if not (field.value or "").startswith("… and ")]
    assert [(field.name or "")[:3] for field in kept] == [f"{index:03}" for index in range(len(kept))]
    if len(kept) < len(fields):
        assert shown[-1].value == f"… and {len(fields) - len(kept)} more"


def test_a_long_list_is_spread_over_fields_of_at_most_1024_characters() -> None:
    """Lines go into as few fields as the value limit allows; later ones say they continue the first."""
    lines = [f"line {number} " + "x" * 90 for number in range(30)]
    fields = lines_fields("By channel", lines)
    assert [field.name for field in fields] == ["By channel"] + ["By channel (continued)"] * (len(fields) - 1)
    assert all(len(field.value) <= FIELD_VALUE_MAX for field in fields)
    assert "\n".join(field.value for field in fields).splitlines() == lines


def test_messages_hold_ten_embeds_and_6000_characters_at_most() -> None:
    small = [discord.Embed(title="x") for _ in range(12)]
    assert [len(message) for message in messages_of(small)] == [10, 2]
    large = [discord.Embed(description="y" * 3500) for _ in range(3)]
    assert [len(message) for message in messages_of(large)] == [1, 1, 1]


def test_without_a_server_colour_the_embeds_take_parleys() -> None:
    assert server_colour(None) == PARLEY_COLOUR


# --- /parley usage ------------------------------------------------------------------------------


def test_usage_ranks_channels_and_members_by_tokens() -> None:
    """Biggest spenders first, as channel and member mentions, in the embed's fields."""
    report = UsageReport.of([row(3, channel=7), row(4, channel=8, input_tokens=5000), row(4, channel=7)])
    [embed] = usage_embeds(report, "week", PARLEY_COLOUR, as_of=NOW)
    by_channel, by_member = embed.fields
    assert by_channel.name == "By channel" and by_member.name == "By member"
    assert [line.split()[0] for line in (by_channel.value or "").splitlines()] == ["<#8>", "<#7>"]
    assert (by_member.value or "").startswith("<@4> 2 answers")
    assert embed.timestamp == NOW and "the last 7 days" in (embed.description or "")


def test_a_model_without_a_price_is_named_and_left_out_of_the_cost() -> None:
    """The report says which models it could not price instead of counting them as free."""
    report = UsageReport.of([row(3), row(4, model="llm-server:my-local-model")])
    [embed] = usage_embeds(report, "day", PARLEY_COLOUR, as_of=NOW)
    assert "Not in the costs: No price known for llm-server:my-local-model." in embed_text(embed)
    assert report.total.cost == cost_of(row(3)) and report.total.answers == 2


def test_usage_lists_at_most_fifteen_of_each_and_counts_the_rest() -> None:
    report = UsageReport.of([row(member, channel=member, input_tokens=member) for member in range(100, 140)])
    embeds = usage_embeds(report, "month", PARLEY_COLOUR, as_of=NOW)
    assert_within_limits(embeds)
    text = "\n".join(map(embed_text, embeds))
    assert text.count("<#") == USAGE_MAX_ROWS and text.count("<@") == USAGE_MAX_ROWS
    assert text.count(f"… and {40 - USAGE_MAX_ROWS} more") == 2


def test_usage_without_tokens_or_archive_says_so() -> None:
    [embed] = usage_embeds(UsageReport(), "week", PARLEY_COLOUR, as_of=NOW, notes=[ARCHIVE_OFF])
    assert (
        embed.description
        == f"Parley used no model tokens in this server the last 7 days (UTC, today included).\n{ARCHIVE_OFF}"
    )


# --- /parley usage's chart ----------------------------------------------------------------------


def month_of_usage() -> tuple[list[TokenUsage], date, date]:
    """Thirty days ending on DAY: usage on even days only, in ten channels of growing size."""
    first = DAY - timedelta(days=29)
    rows = [
        row(ME, channel=100 + channel, day=first + timedelta(days=day), input_tokens=1000 * (channel + 1))
        for day in range(0, 30, 2)
        for channel in range(10)
    ]
    return rows, first, DAY


def test_daily_usage_keeps_the_biggest_channels_and_groups_the_rest() -> None:
    """The biggest channels each get a colour, named as the server names them; the rest are "other channels"."""
    rows, first, last = month_of_usage()
    data = daily_usage(rows, first, last, {109: "big   one", 108: "x" * 40})
    assert len(data.days) == 30 and data.days[-1] == DAY
    assert data.channels[0] == "#big one" and data.channels[1] == "#" + "x" * 40
    assert data.channels[2] == "channel 107" and data.channels[-1] == OTHER_CHANNELS
    assert len(data.channels) == CHART_MAX_CHANNELS + 1
    assert sum(map(sum, data.tokens)) == sum(usage.total_tokens for usage in rows)
    assert Decimal(str(round(sum(map(sum, data.costs)), 9))) == round(sum(cost_of(usage) or 0 for usage in rows), 9)
    assert data.tokens[0][0] == 10_000 + 100 and data.tokens[0][1] == 0


def test_legend_names_are_cut_to_the_room_they_have() -> None:
    """A name is cut by its drawn width, not its letters: more narrow letters fit than wide ones."""
    font = ImageFont.load_default(size=FONT_SIZE)
    wide, narrow = fit("#" + "W" * 100, font, 170), fit("#" + "i" * 100, font, 170)
    assert wide.endswith("…") and narrow.endswith("…") and len(narrow) > len(wide)
    assert font.getlength(wide) <= 170 and font.getlength(narrow) <= 170
    assert fit("#general", font, 170) == "#general"


def test_rows_outside_the_period_are_left_out() -> None:
    data = daily_usage([row(ME, day=DAY - timedelta(days=10)), row(ME)], DAY - timedelta(days=6), DAY, {})
    assert data.tokens == [[0, 0, 0, 0, 0, 0, 1100]]


def colours_in(image: Image.Image, box: tuple[int, int, int, int]) -> set[Any]:
    counted = image.crop(box).getcolors(maxcolors=WIDTH * HEIGHT)
    assert counted is not None
    return {colour for _, colour in counted}


def test_the_chart_is_a_png_with_bars_on_the_days_with_usage() -> None:
    """A PNG of the chart's size, not blank: each day with usage has a bar in each panel in the biggest channel's
    colour, and the days without have none."""
    rows, first, last = month_of_usage()
    data = daily_usage(rows, first, last, {})
    png = Image.open(io.BytesIO(usage_chart_png(data)))
    assert (png.format, png.size) == ("PNG", (WIDTH, HEIGHT))
    image = png.convert("RGB")
    assert len(colours_in(image, (0, 0, WIDTH, HEIGHT))) > len(PALETTE)
    for panel in panels():
        for day in range(30):
            left, right = slot(panel, day, 30)
            bars = colours_in(image, (left + 1, panel.top, right - 1, panel.bottom)) & set(PALETTE)
            assert bars == (set(PALETTE) if day % 2 == 0 else set()), day


def test_a_period_without_usage_draws_empty_panels() -> None:
    """No usage: the chart still draws (axes and labels), with no bar."""
    data = daily_usage([], DAY - timedelta(days=6), DAY, {})
    image = Image.open(io.BytesIO(usage_chart_png(data))).convert("RGB")
    assert not colours_in(image, (0, 0, WIDTH, HEIGHT)) & set(PALETTE)
    assert colours_in(image, (0, 0, WIDTH, HEIGHT)) != {BACKGROUND}


# --- /parley memory list and /parley profile show ------------------------------------------------


def memory(memory_id: int, fact: str, *, about: int | None = ME, said_by: int = 4) -> Memory:
    created = NOW - timedelta(minutes=memory_id)
    return Memory(memory_id, GUILD, CHANNEL, about, said_by, 900 + memory_id, fact, created)


def test_memories_are_fields_named_by_their_id_and_whose_they_are() -> None:
    """Each fact is a field named by the id /parley memory forget takes; long facts are cut and markdown escaped."""
    found = [memory(1, "likes *tea*"), memory(2, "x" * 500, about=None, said_by=ME), memory(3, "a", about=9)]
    [embed] = memories_embeds(found, ME, PARLEY_COLOUR, hidden=True)
    assert [field.name for field in embed.fields] == ["1 · about you", "2 · told by you", "3 · this channel's"]
    assert (embed.fields[0].value or "").startswith(r"“likes \*tea\*”")
    assert "x" * 200 + "…" in (embed.fields[1].value or "")
    assert f"[source](https://discord.com/channels/{GUILD}/{CHANNEL}/901)" in (embed.fields[0].value or "")
    assert CHANNEL_MEMORIES_HIDDEN in (embed.description or "") and embed.timestamp == found[0].created_at


def test_no_memories_says_so() -> None:
    [embed] = memories_embeds([], ME, PARLEY_COLOUR, hidden=False)
    assert embed.description == "Parley remembers nothing in this channel or about you." and not embed.fields


def test_profile_shows_each_value_its_source_and_when_it_changed() -> None:
    """A field per setting with its source; who changed it and when for a command's; timed by the last change."""
    changed = NOW - timedelta(hours=1)
    values = {name: Value("", Source.DEFAULT) for name in FIELDS}
    values["model"] = Value("openai:gpt-4.1", Source.CHANNEL_COMMAND, set_by=ME, set_at=changed)
    embed = profile_embed(values, CHANNEL, ["openai:gpt-4.1", "openai:gpt-4.1-mini"], PARLEY_COLOUR)
    fields = {field.name: field.value or "" for field in embed.fields}
    assert fields["Model"].splitlines() == [
        "`openai:gpt-4.1`",
        f"set for this channel by command by <@{ME}> <t:{int(changed.timestamp())}:R>",
    ]
    assert fields["Persona"] == "none\ndefault: none"
    assert fields["Models allowed"] == "`openai:gpt-4.1`, `openai:gpt-4.1-mini`"
    assert embed.timestamp == changed and f"<#{CHANNEL}>" in (embed.description or "")


def test_a_long_list_of_allowed_models_is_cut_and_counted() -> None:
    names = [f"provider:model-{number:04}" for number in range(200)]
    text = clip_list(names)
    shown = text.count("`") // 2
    assert len(text) <= FIELD_VALUE_MAX and text.endswith(f" and {200 - shown} more") and shown > 10
