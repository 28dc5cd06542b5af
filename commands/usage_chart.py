"""`/parley-admin usage week|month`'s chart: tokens and estimated cost per UTC day, stacked by channel, as a PNG.

Drawn with Pillow, which Parley already has for images, rather than matplotlib: a stacked bar chart is a few
rectangles and labels, and matplotlib would add about 150 MB to the deploy (itself, numpy, fontTools, ...) and
over a second of import. Drawing takes CPU: callers run `usage_chart_png` in a thread (asyncio.to_thread).
"""

from __future__ import annotations

import io
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING

from archive import TokenUsage
from usage.costs import cost_of

if TYPE_CHECKING:
    from PIL import ImageDraw, ImageFont

    _Font = ImageFont.ImageFont | ImageFont.FreeTypeFont

WIDTH, HEIGHT = 960, 640
BACKGROUND = (255, 255, 255)
INK = (40, 40, 48)
GRID = (225, 225, 232)
# Colour-blind-safe (Okabe-Ito), the biggest channel first; the last is for the channels grouped as "other".
PALETTE = [
    (0, 114, 178),
    (230, 159, 0),
    (0, 158, 115),
    (204, 121, 167),
    (86, 180, 233),
    (213, 94, 0),
    (240, 228, 66),
    (120, 120, 120),
]
# Channels shown on their own; the rest share the last colour.
CHART_MAX_CHANNELS = len(PALETTE) - 1
OTHER_CHANNELS = "other channels"
FONT_SIZE = 14
# Plot area: left margin for the axis labels, right margin for the legend.
LEFT, RIGHT, TOP, BOTTOM = 80, 220, 36, 40
PANEL_GAP = 56
GRIDLINES = 4


@dataclass(frozen=True)
class DailyUsage:
    """A period's tokens and cost per day and channel, in the chart's order: the biggest channels first."""

    days: list[date]
    channels: list[str]
    tokens: list[list[int]]  # [channel][day]
    costs: list[list[float]]  # [channel][day], US dollars


@dataclass(frozen=True)
class Box:
    left: int
    top: int
    right: int
    bottom: int


def daily_usage(rows: Iterable[TokenUsage], first: date, last: date, names: Mapping[int, str]) -> DailyUsage:
    """The rows from `first` to `last` (UTC days, both included) per day and channel; channels are named by
    `names` (an id it lacks is shown as "channel <id>"), and beyond the biggest CHART_MAX_CHANNELS they are grouped.
    A channel's name can be as long as Discord allows (100 characters): the legend cuts it to fit."""
    days = [first + timedelta(days=offset) for offset in range((last - first).days + 1)]
    column = {day: index for index, day in enumerate(days)}
    tokens: defaultdict[int, Counter[int]] = defaultdict(Counter)
    costs: defaultdict[int, defaultdict[int, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        if row.day not in column:
            continue
        tokens[row.channel_id][column[row.day]] += row.total_tokens
        costs[row.channel_id][column[row.day]] += float(cost_of(row) or 0)
    ranked = sorted(tokens, key=lambda channel: (-tokens[channel].total(), channel))
    shown, grouped = ranked[:CHART_MAX_CHANNELS], ranked[CHART_MAX_CHANNELS:]
    if len(grouped) == 1:  # one channel more gets its own colour rather than an "other" of one
        shown, grouped = ranked, []
    labels = [_channel_label(channel, names) for channel in shown]
    token_rows = [[tokens[channel][index] for index in range(len(days))] for channel in shown]
    cost_rows = [[costs[channel][index] for index in range(len(days))] for channel in shown]
    if grouped:
        labels.append(OTHER_CHANNELS)
        token_rows.append([sum(tokens[channel][index] for channel in grouped) for index in range(len(days))])
        cost_rows.append([sum(costs[channel][index] for channel in grouped) for index in range(len(days))])
    return DailyUsage(days, labels, token_rows, cost_rows)


def _channel_label(channel_id: int, names: Mapping[int, str]) -> str:
    name = names.get(channel_id)
    if name is None:
        return f"channel {channel_id}"
    return "#" + " ".join(name.split())


def panels() -> tuple[Box, Box]:
    """Where the tokens' bars (top) and the costs' bars (bottom) are drawn."""
    height = (HEIGHT - TOP - BOTTOM - PANEL_GAP) // 2
    tokens = Box(LEFT, TOP, WIDTH - RIGHT, TOP + height)
    costs = Box(LEFT, tokens.bottom + PANEL_GAP, WIDTH - RIGHT, tokens.bottom + PANEL_GAP + height)
    return tokens, costs


def slot(panel: Box, index: int, days: int) -> tuple[int, int]:
    """The left and right x of day `index`'s bar in `panel`: a fifth of each day's width is the gap."""
    width = (panel.right - panel.left) / days
    left = panel.left + index * width + width * 0.1
    return round(left), max(round(left + width * 0.8), round(left) + 1)


def color_of(series: int, data: DailyUsage) -> tuple[int, int, int]:
    """The colour of series `series`: "other channels" always the last colour of the palette."""
    if data.channels[series] == OTHER_CHANNELS:
        return PALETTE[-1]
    return PALETTE[series]


def usage_chart_png(data: DailyUsage) -> bytes:
    """The chart as PNG bytes: tokens per day (top) and cost per day (bottom), stacked by channel, and a legend."""
    from PIL import Image, ImageDraw, ImageFont  # Pillow is loaded with the first chart, not at every start

    image = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUND)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=FONT_SIZE)
    tokens_panel, costs_panel = panels()
    _panel(draw, font, tokens_panel, data, [[float(value) for value in row] for row in data.tokens], _count)
    _panel(draw, font, costs_panel, data, data.costs, _dollars)
    draw.text((tokens_panel.left, 8), "Tokens per day (UTC), by channel", fill=INK, font=font)
    draw.text((costs_panel.left, tokens_panel.bottom + 26), "Estimated cost per day (US$)", fill=INK, font=font)
    _day_labels(draw, font, costs_panel, data.days)
    _legend(draw, font, data, tokens_panel.right + 24, tokens_panel.top)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _panel(
    draw: ImageDraw.ImageDraw,
    font: _Font,
    box: Box,
    data: DailyUsage,
    values: Sequence[Sequence[float]],
    label: Callable[[float, float], str],
) -> None:
    """One panel: gridlines with their values, then each day's bar, one stacked segment per channel."""
    totals = [sum(row[index] for row in values) for index in range(len(data.days))]
    top = _nice_ceiling(max(totals, default=0))
    for line in range(GRIDLINES + 1):
        y = box.bottom - (box.bottom - box.top) * line / GRIDLINES
        draw.line([(box.left, y), (box.right, y)], fill=GRID)
        text = label(top * line / GRIDLINES, top)
        draw.text((box.left - 8, y), text, fill=INK, font=font, anchor="rm")
    if top <= 0:
        return
    scale = (box.bottom - box.top) / top
    for index in range(len(data.days)):
        left, right = slot(box, index, len(data.days))
        base = float(box.bottom)
        for series, row in enumerate(values):
            if row[index] <= 0:
                continue
            height = max(row[index] * scale, 1.0)  # a sliver of a day still shows
            draw.rectangle([left, round(base - height), right, round(base)], fill=color_of(series, data))
            base -= height


def _day_labels(draw: ImageDraw.ImageDraw, font: _Font, box: Box, days: Sequence[date]) -> None:
    # About ten labels whatever the period, so that they never overlap.
    every = max(1, math.ceil(len(days) / 10))
    for index in range(0, len(days), every):
        left, right = slot(box, index, len(days))
        draw.text(((left + right) / 2, box.bottom + 8), days[index].strftime("%b %d"), fill=INK, font=font, anchor="mt")


def _legend(draw: ImageDraw.ImageDraw, font: _Font, data: DailyUsage, x: int, y: int) -> None:
    room = WIDTH - (x + FONT_SIZE + 8) - 4
    for series, name in enumerate(data.channels):
        top = y + series * (FONT_SIZE + 10)
        draw.rectangle([x, top, x + FONT_SIZE, top + FONT_SIZE], fill=color_of(series, data))
        draw.text((x + FONT_SIZE + 8, top + FONT_SIZE / 2), fit(name, font, room), fill=INK, font=font, anchor="lm")


def fit(text: str, font: _Font, width: float) -> str:
    """`text` as drawn in `font` within `width` pixels, ending in "…" where it was cut (a name of wide letters
    takes fewer of them than one of narrow letters)."""
    if font.getlength(text) <= width:
        return text
    while text and font.getlength(text + "…") > width:
        text = text[:-1]
    return text + "…"


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above `value`, so that gridlines read as round figures."""
    if value <= 0:
        return 0.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in (1.0, 2.0, 2.5, 5.0, 10.0) if step * power >= value)


def _count(value: float, top: float) -> str:
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


def _dollars(value: float, top: float) -> str:
    # One number of decimals on the whole axis: cents, or as many more as a cheap period's quarters need.
    decimals = 2 if top >= 0.1 else 2 - math.floor(math.log10(top)) if top > 0 else 2
    return f"${value:.{decimals}f}"
