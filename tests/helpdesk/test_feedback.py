"""helpdesk/feedback.py: a support answer's Solved and Not helpful buttons, over a real archive on both backends.

Discord's side is a stand-in here (what an interaction and a post answer); end to end, with the fake Discord, is
tests/e2e/test_e2e_support_feedback.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import discord
import pytest

from answering.delivery import Delivery
from archive import Archive
from archive.null import NULL_ARCHIVE
from helpdesk.feedback import (
    NOT_HELPFUL,
    NOT_KEPT,
    NOT_YOURS,
    SOLVED,
    THANKS,
    FeedbackButton,
    SupportFeedback,
    feedback_view,
)
from helpdesk.question import SupportAnswer

ALICE, BOB = 100, 200
GUILD, CHANNEL = 10, 1
QUESTION, POST = 1000, 1001
SUPPORT = SupportAnswer(QUESTION, ALICE, GUILD, CHANNEL, "install.md", "Installing", 0.9)
LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass
class Stores:
    archive: Archive


@dataclass
class Post:
    """A post of Parley's answer: what `offer` reads and edits."""

    id: int = POST
    channel: Any = field(default_factory=lambda: discord.Object(CHANNEL))
    views: list[discord.ui.View | None] = field(default_factory=list)

    async def edit(self, *, view: discord.ui.View | None) -> Post:
        self.views.append(view)
        return self


class Response:
    def __init__(self) -> None:
        self.said: list[tuple[str, bool]] = []
        self.deferred = False

    async def send_message(self, content: str, *, ephemeral: bool = False) -> None:
        self.said.append((content, ephemeral))

    async def defer(self, *, ephemeral: bool = False, thinking: bool = False) -> None:
        self.deferred = True


class Followup:
    def __init__(self, response: Response) -> None:
        self.response = response

    async def send(self, content: str, *, ephemeral: bool = False) -> None:
        self.response.said.append((content, ephemeral))


class Press:
    """An interaction: `user` pressing a button on `message`, in `channel`."""

    def __init__(self, user: int, message: Post | None = None, channel: object = None) -> None:
        self.user = discord.Object(user)
        self.message = message or Post()
        self.channel = channel
        self.response = Response()
        self.followup = Followup(self.response)

    @property
    def said(self) -> list[tuple[str, bool]]:
        return self.response.said


def desk(archive: Archive) -> SupportFeedback:
    return SupportFeedback(Stores(archive), Delivery(5))


async def press(feedback: SupportFeedback, who: int, verdict: Any, **where: Any) -> Press:
    interaction = Press(who, **where)
    await feedback.pressed(interaction, verdict, QUESTION, ALICE)  # type: ignore[arg-type]
    return interaction


def custom_ids(view: discord.ui.View | None) -> list[str]:
    assert view is not None
    return [str(getattr(item, "custom_id", "")) for item in view.children]


async def test_the_buttons_go_under_the_post_once_the_offer_is_kept(archive: Archive) -> None:
    post = Post()
    await desk(archive).offer(SUPPORT, post)  # type: ignore[arg-type]

    [view] = post.views
    assert view is not None and view.timeout is None  # persistent
    assert custom_ids(view) == [
        f"parley:feedback:solved:{QUESTION}:{ALICE}",
        f"parley:feedback:not_helpful:{QUESTION}:{ALICE}",
    ]
    assert [item.item.label for item in view.children if isinstance(item, FeedbackButton)] == ["Solved", "Not helpful"]
    kept = await archive.feedback(QUESTION)
    assert kept is not None and (kept.asker_id, kept.post_id, kept.verdict) == (ALICE, POST, "")


async def test_without_an_archive_there_are_no_buttons() -> None:
    post = Post()
    await desk(NULL_ARCHIVE).offer(SUPPORT, post)  # type: ignore[arg-type]
    assert post.views == []


async def test_the_askers_press_counts_and_a_second_press_changes_it(archive: Archive) -> None:
    feedback = desk(archive)
    await feedback.offer(SUPPORT, Post())  # type: ignore[arg-type]

    solved = await press(feedback, ALICE, SOLVED)
    assert solved.said == [(THANKS[SOLVED], True)]
    kept = await archive.feedback(QUESTION)
    assert kept is not None and kept.verdict == "solved"
    changed = await press(feedback, ALICE, NOT_HELPFUL)
    assert changed.said == [(THANKS[NOT_HELPFUL], True)]
    kept = await archive.feedback(QUESTION)
    assert kept is not None and kept.verdict == "not_helpful"  # one verdict per question: the latest


async def test_anyone_elses_press_is_told_privately_and_records_nothing(archive: Archive) -> None:
    feedback = desk(archive)
    await feedback.offer(SUPPORT, Post())  # type: ignore[arg-type]

    stranger = await press(feedback, BOB, SOLVED)
    assert stranger.said == [(NOT_YOURS, True)] and not stranger.response.deferred
    kept = await archive.feedback(QUESTION)
    assert kept is not None and kept.verdict == ""


async def test_a_forged_button_for_another_question_or_asker_records_nothing(archive: Archive) -> None:
    feedback = desk(archive)
    await feedback.offer(SUPPORT, Post())  # type: ignore[arg-type]
    await feedback.offer(SupportAnswer(2000, BOB, GUILD, CHANNEL, "d", "s", 0.9), Post(2001))  # type: ignore[arg-type]

    # Bob forges Alice's question with his own id, then his own question's button onto Alice's answer's post.
    forged = Press(BOB)
    await feedback.pressed(forged, SOLVED, QUESTION, BOB)  # type: ignore[arg-type]
    moved = Press(BOB, Post(POST))
    await feedback.pressed(moved, SOLVED, 2000, BOB)  # type: ignore[arg-type]

    assert forged.said == [(NOT_KEPT, True)] and moved.said == [(NOT_KEPT, True)]
    assert [row.verdict for row in await archive.guild_feedback(GUILD, LONG_AGO)] == ["", ""]


async def test_a_press_without_an_archive_is_told_nothing_was_kept() -> None:
    pressed = await press(desk(NULL_ARCHIVE), ALICE, SOLVED)
    assert pressed.said == [(NOT_KEPT, True)]


@pytest.mark.parametrize("verdict", [SOLVED, NOT_HELPFUL])
async def test_after_a_restart_the_button_is_rebuilt_from_its_custom_id(verdict: Any) -> None:
    [button, other] = feedback_view(QUESTION, ALICE).children
    pressed = button if verdict == SOLVED else other
    custom_id = str(getattr(pressed, "custom_id", ""))
    match = FeedbackButton.__discord_ui_compiled_template__.fullmatch(custom_id)
    assert match is not None

    rebuilt = await FeedbackButton.from_custom_id(None, None, match)  # type: ignore[arg-type]

    assert (rebuilt.verdict, rebuilt.question_id, rebuilt.asker_id) == (verdict, QUESTION, ALICE)
    assert rebuilt.item.custom_id == custom_id
    assert FeedbackButton.__discord_ui_compiled_template__.fullmatch("parley:feedback:solved:x:1") is None


async def test_a_press_reaching_a_client_without_feedback_buttons_is_told_so() -> None:
    interaction = Press(ALICE)
    interaction.client = object()  # type: ignore[attr-defined]
    await FeedbackButton(SOLVED, QUESTION, ALICE).callback(interaction)  # type: ignore[arg-type]
    assert interaction.said == [(NOT_KEPT, True)]


async def test_two_presses_racing_leave_one_verdict_the_latest(archive: Archive) -> None:
    feedback = desk(archive)
    await feedback.offer(SUPPORT, Post())  # type: ignore[arg-type]

    solved, unhelpful = await asyncio.gather(press(feedback, ALICE, SOLVED), press(feedback, ALICE, NOT_HELPFUL))

    assert solved.said == [(THANKS[SOLVED], True)] and unhelpful.said == [(THANKS[NOT_HELPFUL], True)]
    [kept] = await archive.guild_feedback(GUILD, LONG_AGO)
    assert kept.verdict in {"solved", "not_helpful"} and kept.decided_at is not None
