"""Promise: "However I ask Parley for an image (an @mention answered whole or streamed, a reply asking to change the
last one, /ask), it makes at most IMAGES_PER_MEMBER_PER_DAY for me and IMAGES_PER_SERVER_PER_DAY for the server each
UTC day; past either I am told in one line, and no image model is called."

Each row is a path, run once to use the day's one image and again past the limit, on both archive backends (the
count is kept with the day's usage).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.test_e2e_ask import ask
from tests.e2e.test_e2e_images import IMAGE_MODEL, draws
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, BOT_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM
from tests.support.e2e_support import RunningBot, call_text, say, settled

MEMBER_LINE = "You've had your 1 images for today, so I can't make another"
SERVER_LINE = "This server has had its 1 images for today, so I can't make another"


async def mention(fake: FakeDiscord, author: int, text: str) -> str:
    """An @mention; the answer's text once it is posted."""
    before = len(fake.bot_posts)
    await say(fake, author, f"<@{BOT_ID}> {text}")
    posts = await fake.wait_for_posts(before + 1)
    await settled(fake)
    return posts[-1].message["content"]


async def reply_to_last(fake: FakeDiscord, author: int, text: str) -> str:
    """A reply to Parley's last post (no @mention); the answer's text."""
    before = len(fake.bot_posts)
    await say(fake, author, text, reply_to=int(fake.bot_posts[-1].message["id"]))
    posts = await fake.wait_for_posts(before + 1)
    await settled(fake)
    return posts[-1].message["content"]


async def by_ask(fake: FakeDiscord, author: int, text: str) -> str:
    calls = await ask(fake, text, user_id=author)
    await settled(fake)
    return "\n".join(text for call in calls if call.body and (text := call_text(call)))


@dataclass(frozen=True)
class Path:
    """A way to ask for an image (`ask(fake, author, text)`, its answer's text) and the settings it runs with."""

    ask: Callable[[FakeDiscord, int, str], Awaitable[str]]
    settings: dict[str, Any]


PATHS = [
    pytest.param(Path(mention, {"stream_answers": False}), id="mention-whole"),
    pytest.param(Path(mention, {"stream_answers": True}), id="mention-streamed"),
    pytest.param(Path(reply_to_last, {}), id="reply-make-it"),
    pytest.param(Path(by_ask, {}), id="ask-command"),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("limit", "second_asker", "line"),
    [("member", ALICE_ID, MEMBER_LINE), ("server", BOB_ID, SERVER_LINE)],
    ids=["member", "server"],
)
async def test_the_daily_image_limits_hold_on_every_path(
    bot: RunningBot,
    fake: FakeDiscord,
    llm: FakeLLM,
    archive_url: str,
    path: Path,
    limit: str,
    second_asker: int,
    line: str,
) -> None:
    llm.handler = draws
    limits = {"images_per_member_per_day": 1} if limit == "member" else {"images_per_server_per_day": 1}
    await bot.start(image_model=IMAGE_MODEL, database_url=archive_url, **limits, **path.settings)
    # The day's one image, asked for by an @mention (a reply needs a post of Parley's to reply to).
    await mention(fake, ALICE_ID, "draw a red fox")
    assert len(llm.image_requests) == 1

    told = await path.ask(fake, second_asker, "make it night" if path.ask is reply_to_last else "draw a grey wolf")

    assert told.startswith(line) and "\n" not in told, told
    assert len(llm.image_requests) == 1
