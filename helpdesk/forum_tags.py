"""A forum post marked solved by its asker: tagged with its forum's own "Solved" tag, where the forum has one.

Forums name the tag as they like ("Solved", "✅ Resolved"), so it is found by its name's letters. Applying it is an
edit of the post's thread (`applied_tags`), which takes Manage Threads in a post Parley did not open: without it,
or without such a tag, the post is left as it is and the log says why; the asker is never told of it as an error.
"""

from __future__ import annotations

import logging

import discord

log = logging.getLogger("parley.helpdesk")

# A forum tag whose name is one of these, letters only and lowercased, marks a post solved.
SOLVED_TAG_NAMES = frozenset({"solved", "resolved"})


def solved_tag(forum: discord.ForumChannel) -> discord.ForumTag | None:
    """The forum's tag for a solved post, if it has one."""
    return next((tag for tag in forum.available_tags if _letters(tag.name) in SOLVED_TAG_NAMES), None)


async def mark_solved(place: object, solved: bool) -> None:
    """Apply (`solved`) or take off the Solved tag of the forum post `place` (any other place: nothing)."""
    if not isinstance(place, discord.Thread) or not isinstance(place.parent, discord.ForumChannel):
        return
    tag = solved_tag(place.parent)
    if tag is None:
        log.info("forum %s has no Solved tag: post %s is not tagged", place.parent.id, place.id)
        return
    applied = any(each.id == tag.id for each in place.applied_tags)
    try:
        if solved and not applied:
            await place.add_tags(tag, reason="its asker marked Parley's answer as solving it")
        elif not solved and applied:
            await place.remove_tags(tag, reason="its asker marked Parley's answer as not helpful")
    except discord.HTTPException as error:  # no Manage Threads, or the post has all the tags it may have
        log.warning("could not change the Solved tag of forum post %s: %s", place.id, error)


def _letters(name: str) -> str:
    return "".join(char for char in name.lower() if char.isalpha())
