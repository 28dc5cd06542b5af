"""Benchmark `/parley-admin usage month`'s chart: the time to turn a month of usage rows into the PNG.

    python bench/bench_usage_chart.py [--days 30] [--channels 200] [--members 20] [--runs 5]

Rows as the archive returns them (one per UTC day, channel, member and model) for a busy server: every
channel has usage from `--members` members on every one of `--days` days. The work timed is what
`/parley-admin usage` runs in a thread (commands/usage_report.chart_of): grouping the rows per day and channel,
pricing each row, and drawing and compressing the PNG. Printed: the best and median of `--runs` runs,
the rows, and the PNG's size.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from archive import TokenUsage  # noqa: E402
from commands.usage_report import chart_of  # noqa: E402

LAST_DAY = date(2026, 11, 25)


def month_of_rows(days: int, channels: int, members: int) -> list[TokenUsage]:
    """Every channel used by every member on every day, in growing amounts so that channels rank apart."""
    first = LAST_DAY - timedelta(days=days - 1)
    return [
        TokenUsage(
            first + timedelta(days=day),
            1,
            1000 + channel,
            5000 + member,
            input_tokens=200 * (channel + 1) + member,
            output_tokens=20 * (channel + 1),
            model="openai:gpt-4.1-mini",
        )
        for day in range(days)
        for channel in range(channels)
        for member in range(members)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--channels", type=int, default=200)
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    rows = month_of_rows(options.days, options.channels, options.members)
    names = {1000 + channel: f"channel-{channel}" for channel in range(options.channels)}
    first = LAST_DAY - timedelta(days=options.days - 1)
    timings = []
    png = b""
    for _ in range(options.runs):
        started = time.perf_counter()
        png = chart_of(rows, first, LAST_DAY, names)
        timings.append(time.perf_counter() - started)
    print(f"rows: {len(rows):,} ({options.days} days x {options.channels} channels x {options.members} members)")
    print(f"chart: best {min(timings):.3f} s, median {statistics.median(timings):.3f} s of {options.runs} runs")
    print(f"PNG: {len(png):,} bytes")


if __name__ == "__main__":
    main()
