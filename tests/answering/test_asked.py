"""answering/asked.py as a unit: where a public answer to a command may be posted, from the interaction's own
permissions (the asker's and Parley's). What the asker is shown is the end-to-end tests' (test_e2e_ask.py)."""

from __future__ import annotations

import discord
import pytest

from answering.asked import MAY_NOT_POST, PARLEY_MAY_NOT_POST, posting_refusal

POSTS = discord.Permissions(view_channel=True, send_messages=True, send_messages_in_threads=True)


def without(**denied: bool) -> discord.Permissions:
    permissions = discord.Permissions(POSTS.value)
    permissions.update(**denied)
    return permissions


@pytest.mark.parametrize("in_thread", [False, True])
def test_where_both_may_post_a_public_answer_is_allowed(in_thread: bool) -> None:
    assert posting_refusal(POSTS, POSTS, in_thread=in_thread) is None


@pytest.mark.parametrize(
    ("member", "app", "in_thread", "refusal"),
    [
        (without(send_messages=False), POSTS, False, MAY_NOT_POST),
        (without(send_messages_in_threads=False), POSTS, True, MAY_NOT_POST),
        (POSTS, without(view_channel=False), False, PARLEY_MAY_NOT_POST),
        (POSTS, without(send_messages=False), False, PARLEY_MAY_NOT_POST),
        (POSTS, without(send_messages_in_threads=False), True, PARLEY_MAY_NOT_POST),
    ],
)
def test_where_the_asker_or_parley_may_not_post_a_public_answer_is_refused(
    member: discord.Permissions, app: discord.Permissions, in_thread: bool, refusal: str
) -> None:
    assert posting_refusal(member, app, in_thread=in_thread) == refusal


def test_in_a_thread_only_send_messages_in_threads_counts() -> None:
    """A thread's posts need Send Messages in Threads, not Send Messages (which the parent channel may deny)."""
    assert posting_refusal(without(send_messages=False), without(send_messages=False), in_thread=True) is None
