"""helpdesk/handoff.py: the hand-off line pings the staff role alone, and a post Discord refuses is logged, not
raised."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import discord
import pytest

from helpdesk.handoff import hand_off, handoff_mentions, waited_text

STAFF = 10**17 + 7


class Post:
    """A forum post's thread, as the hand-off posts to it: what it was sent, or Discord's refusal."""

    def __init__(self, refusal: discord.HTTPException | None = None) -> None:
        self.id = 42
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.refusal = refusal

    async def send(self, content: str, **options: Any) -> str:
        if self.refusal is not None:
            raise self.refusal
        self.sent.append((content, options))
        return content


def test_the_hand_off_may_ping_the_staff_role_and_nobody_else() -> None:
    mentions: dict[str, Any] = dict(handoff_mentions(STAFF).to_dict())
    assert mentions == {"parse": [], "roles": [STAFF]}


@pytest.mark.parametrize(("minutes", "said"), [(60, "60 minutes"), (90, "90 minutes"), (180, "3 hours")])
def test_the_wait_is_said_in_minutes_or_hours(minutes: int, said: str) -> None:
    assert waited_text(timedelta(minutes=minutes)) == said


async def test_the_line_names_the_role_and_the_wait() -> None:
    post = Post()
    await hand_off(post, STAFF, timedelta(hours=1))  # type: ignore[arg-type]
    [(content, options)] = post.sent
    assert (
        content == f"<@&{STAFF}> this post has had no answer for 60 minutes, and the server's documents don't cover it."
    )
    assert dict(options["allowed_mentions"].to_dict()) == {"parse": [], "roles": [STAFF]}


async def test_a_post_discord_refuses_is_logged_and_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    response: Any = type("Response", (), {"status": 403, "reason": "Forbidden"})()
    refused = discord.Forbidden(response, {"code": 50013, "message": "Missing Permissions"})
    with caplog.at_level(logging.WARNING, "parley.helpdesk"):
        assert await hand_off(Post(refused), STAFF, timedelta(hours=1)) is None  # type: ignore[arg-type]
    assert "could not hand off post 42" in caplog.text
