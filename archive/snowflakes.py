"""When a Discord id was made: its top bits are milliseconds since Discord's epoch, which both backends
and the file-text budgets read days and time ranges from."""

from __future__ import annotations

# https://discord.com/developers/docs/reference#snowflakes: an id's top bits are its milliseconds since this epoch.
DISCORD_EPOCH_MS = 1_420_070_400_000
SNOWFLAKE_TIMESTAMP_SHIFT = 22


def snowflake_ms(snowflake: int) -> int:
    """The unix milliseconds a Discord id was made at."""
    return (snowflake >> SNOWFLAKE_TIMESTAMP_SHIFT) + DISCORD_EPOCH_MS
