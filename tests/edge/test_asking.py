"""edge/asking.py as a unit: where a command's answer goes, post by post, and how a refusal replaces it.

The interaction here is a stand-in that keeps what it was asked to do, in order: the sequencing is this module's
own logic (which call fills the deferred response, which follows it, what a refusal does to a public response);
what Discord shows of it is the end-to-end tests' (test_e2e_ask.py).
"""

from __future__ import annotations

from typing import Any, cast

import discord
import pytest

from edge.asking import InteractionReply


class Response:
    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls
        self.done = False

    def is_done(self) -> bool:
        return self.done

    async def defer(self, *, ephemeral: bool, thinking: bool) -> None:
        self.done = True
        self.calls.append(("defer", ephemeral))

    async def send_message(self, content: str, **options: Any) -> None:
        self.done = True
        self.calls.append(("respond", content, options.get("ephemeral", False), "view" in options))


class Followup:
    def __init__(self, calls: list[tuple[Any, ...]], fail: list[BaseException]) -> None:
        self.calls = calls
        self.fail = fail

    async def send(self, content: str, **options: Any) -> str:
        if self.fail:
            raise self.fail.pop()
        self.calls.append(("follow", content, options.get("ephemeral", False), "view" in options))
        return f"follow-up {content}"


class Interaction:
    """An interaction as InteractionReply uses it; `fail` makes the next call to Discord raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail: list[BaseException] = []
        self.response = Response(self.calls)
        self.followup = Followup(self.calls, self.fail)
        self.user = discord.Object(id=5)
        self.channel_id = 7

    async def edit_original_response(self, *, content: str, **options: Any) -> str:
        if self.fail:
            raise self.fail.pop()
        self.calls.append(("edit", content))
        return f"original {content}"

    async def original_response(self) -> str:
        return "original"

    async def delete_original_response(self) -> None:
        self.calls.append(("delete", None))


def reply_to(interaction: Interaction, *, ephemeral: bool) -> InteractionReply:
    return InteractionReply(cast(discord.Interaction, interaction), ephemeral=ephemeral)


@pytest.mark.parametrize("ephemeral", [False, True])
async def test_the_first_post_fills_the_deferred_response_the_rest_follow(ephemeral: bool) -> None:
    interaction = Interaction()
    outlet = reply_to(interaction, ephemeral=ephemeral)
    await outlet.defer()
    view = discord.ui.View()
    posts = [await outlet.send("one", first=True, view=view), await outlet.send("two", first=False)]
    assert posts == ["original one", "follow-up two"]
    assert interaction.calls == [("defer", ephemeral), ("edit", "one"), ("follow", "two", ephemeral, False)]
    assert outlet.sent and outlet.public is not ephemeral and outlet.asker_id == 5 and outlet.channel_id == 7


async def test_a_first_post_tried_again_still_fills_the_response() -> None:
    """The delivery tries a post again after a timeout or a server error: the retry must not become a follow-up."""
    interaction = Interaction()
    outlet = reply_to(interaction, ephemeral=False)
    await outlet.defer()
    interaction.fail.append(TimeoutError())
    with pytest.raises(TimeoutError):
        await outlet.send("one", first=True)
    assert not outlet.sent
    assert await outlet.send("one", first=True) == "original one"


async def test_before_the_command_is_acknowledged_a_refusal_is_its_private_response() -> None:
    interaction = Interaction()
    await reply_to(interaction, ephemeral=False).tell("No.")
    assert interaction.calls == [("respond", "No.", True, False)]


async def test_a_public_thinking_response_gives_way_to_a_private_line() -> None:
    """A response cannot turn ephemeral: the public "thinking…" is deleted, and the line follows only for the asker."""
    interaction = Interaction()
    outlet = reply_to(interaction, ephemeral=False)
    await outlet.defer()
    await outlet.tell("Too many questions.")
    assert interaction.calls == [("defer", False), ("delete", None), ("follow", "Too many questions.", True, False)]


async def test_a_private_thinking_response_becomes_the_line() -> None:
    interaction = Interaction()
    outlet = reply_to(interaction, ephemeral=True)
    await outlet.defer()
    await outlet.tell("Too many questions.")
    assert interaction.calls == [("defer", True), ("edit", "Too many questions.")]


async def test_after_an_answer_a_line_follows_it_privately() -> None:
    interaction = Interaction()
    outlet = reply_to(interaction, ephemeral=False)
    await outlet.defer()
    await outlet.send("answer", first=True)
    await outlet.tell("And one more thing.")
    assert interaction.calls[-1] == ("follow", "And one more thing.", True, False)
