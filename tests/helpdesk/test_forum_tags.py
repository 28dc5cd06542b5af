"""helpdesk/forum_tags.py: a forum post marked solved gets its forum's Solved tag, where the forum has one; a missing
tag or permission is logged, never raised. The thread and forum are discord.py's types, specced stand-ins (the fake
Discord has no forums)."""

from __future__ import annotations

import logging
from unittest.mock import AsyncMock, MagicMock

import discord
import pytest

from helpdesk.forum_tags import mark_solved, solved_tag


def tag(tag_id: int, name: str) -> discord.ForumTag:
    made = discord.ForumTag(name=name)
    made.id = tag_id
    return made


def forum_post(*tags: discord.ForumTag, applied: tuple[discord.ForumTag, ...] = ()) -> MagicMock:
    forum = MagicMock(spec=discord.ForumChannel)
    forum.id, forum.available_tags = 5, list(tags)
    post = MagicMock(spec=discord.Thread)
    post.id, post.parent, post.applied_tags = 6, forum, list(applied)
    post.add_tags, post.remove_tags = AsyncMock(), AsyncMock()
    return post


@pytest.mark.parametrize("name", ["Solved", "✅ Resolved", "RESOLVED!"])
def test_the_solved_tag_is_found_by_its_names_letters(name: str) -> None:
    forum = forum_post(tag(1, "Bug"), tag(2, name)).parent
    assert solved_tag(forum) == tag(2, name)


def test_a_forum_without_such_a_tag_has_none() -> None:
    assert solved_tag(forum_post(tag(1, "Bug"), tag(2, "Unsolved")).parent) is None


async def test_marked_solved_the_post_is_tagged_and_marked_otherwise_untagged() -> None:
    solved = tag(2, "Solved")
    post = forum_post(tag(1, "Bug"), solved)
    await mark_solved(post, True)
    post.add_tags.assert_awaited_once()
    assert post.add_tags.await_args.args == (solved,)

    tagged = forum_post(solved, applied=(solved,))
    await mark_solved(tagged, True)  # already tagged: nothing to change
    tagged.add_tags.assert_not_awaited()
    await mark_solved(tagged, False)
    assert tagged.remove_tags.await_args.args == (solved,)


async def test_a_missing_tag_or_permission_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "parley.helpdesk")
    untagged = forum_post(tag(1, "Bug"))
    await mark_solved(untagged, True)
    untagged.add_tags.assert_not_awaited()
    assert "has no Solved tag" in caplog.text

    refused = forum_post(tag(2, "Solved"))
    refused.add_tags.side_effect = discord.Forbidden(MagicMock(status=403, reason="Forbidden"), "Missing Permissions")
    await mark_solved(refused, True)
    assert "could not change the Solved tag of forum post 6" in caplog.text


async def test_anything_but_a_forum_post_is_left_alone() -> None:
    thread = MagicMock(spec=discord.Thread)
    thread.parent = MagicMock(spec=discord.TextChannel)
    thread.add_tags = AsyncMock()
    await mark_solved(thread, True)
    await mark_solved(MagicMock(spec=discord.TextChannel), True)
    await mark_solved(None, True)
    thread.add_tags.assert_not_awaited()
