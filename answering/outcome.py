"""An answer's outcome, and the one tail every answer ends in: posted, recorded, compacted and accounted.

Whole, streamed and regenerated answers differ only in how their work runs (one model call then posts; posts edited
as the model writes; the latest answer's posts edited in place). What follows is the same for all three, so it is
written once, here: a whole answer's text is posted, the posts join the conversation, the tokens are counted, and an
answer that came is noted for "Regenerate", becomes the bot's turn in the model history (replacing the previous one
when regenerated) and may compact the history. The archive follows from these: the manager's listener stores the
conversation with its change, and Discord echoes the posts to `on_message`, which archives them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import discord
from pydantic_ai import RunUsage
from pydantic_ai.messages import ModelMessage

from agent import Reply, ReplyFailed
from answering.usage import UsageAccounting
from conversation import ChannelConversation, ConversationManager
from discord_io import is_closed_thread, reply_mentions, split_message, to_record
from records import AnswerPosts
from streaming import AnswerStreams, Streamed
from upkeep.conversations import ConversationUpkeep

log = logging.getLogger("parley")

APOLOGY = "Sorry, I couldn't come up with an answer just now. Please try again in a moment."


@dataclass(frozen=True)
class AnswerOutcome:
    """What an answer's work produced: the reply (None when the model failed, with `failure`) and its posts.

    `text` is what is still to be posted (a whole answer's reply, or the apology); a streamed or regenerated
    answer's work posted already, into `posts`. `reused` are the posts a regenerated answer was written into,
    which the conversation holds already.
    """

    question: discord.Message
    channel: discord.abc.Messageable
    reply: Reply | None
    failure: ReplyFailed | None = None
    posts: Sequence[discord.Message] = ()
    text: str | None = None
    # The thread opened on the question, which the answer goes into: posts there need no reference to it.
    thread: discord.Thread | None = None
    reused: frozenset[int] = frozenset()
    regenerated: bool = False
    # An answer to an asker without Read Message History (admission.history_access), written without the
    # conversation's history: its turn goes after that history instead of replacing it.
    private: bool = False
    # Regenerated: the model history kept before the turn it rewrites (a private view showed none of it).
    kept_before: Sequence[ModelMessage] = ()

    @classmethod
    def whole(
        cls, question: discord.Message, thread: discord.Thread | None, result: Reply | ReplyFailed, *, private: bool
    ) -> AnswerOutcome:
        """A reply the model wrote at once, or its failure, for the tail to post (the reply, or the apology)."""
        channel = thread or question.channel
        if isinstance(result, ReplyFailed):
            return cls(question, channel, None, result, text=APOLOGY, thread=thread, private=private)
        return cls(question, channel, result, text=result.text, thread=thread, private=private)

    @classmethod
    def streamed(
        cls, question: discord.Message, channel: discord.abc.Messageable, streamed: Streamed, *, private: bool
    ) -> AnswerOutcome:
        """An answer streamed into new posts (the apology, if the model failed)."""
        return cls(question, channel, streamed.reply, streamed.failure, posts=streamed.posts, private=private)

    @classmethod
    def regenerated_into(
        cls,
        question: discord.Message,
        channel: discord.abc.Messageable,
        streamed: Streamed,
        reused: Iterable[discord.Message],
        *,
        kept_before: Sequence[ModelMessage],
    ) -> AnswerOutcome:
        """A new answer streamed into the posts of the previous one (`reused`), and more posts if it is longer."""
        kept = frozenset(post.id for post in reused)
        return cls(
            question,
            channel,
            streamed.reply,
            streamed.failure,
            streamed.posts,
            reused=kept,
            regenerated=True,
            kept_before=kept_before,
        )

    @property
    def usage(self) -> RunUsage:
        """The tokens the work spent, answered or not."""
        if self.reply is not None:
            return self.reply.usage
        return self.failure.usage if self.failure is not None else RunUsage()


class AnswerTail:
    """The end of every answer (`finish`); `deliver` posts text outside an answer (a notice) the same way."""

    def __init__(
        self,
        manager: ConversationManager,
        streams: AnswerStreams,
        accounting: UsageAccounting,
        upkeep: ConversationUpkeep,
        *,
        max_posts: int,
    ) -> None:
        self.manager = manager
        self.streams = streams
        self.accounting = accounting
        self.upkeep = upkeep
        self.max_posts = max_posts

    async def finish(self, outcome: AnswerOutcome, conversation: ChannelConversation) -> list[discord.Message]:
        """Post what is left to post, record the posts and the bot's turn, count the tokens, compact; the posts.

        The tokens are counted first, before anything is posted: the server's budget is then spent by the time
        anyone sees the answer.
        """
        question, channel = outcome.question, outcome.channel
        channel_id: int = getattr(channel, "id", question.channel.id)
        self.accounting.account(question, outcome.usage, channel_id, outcome.reply.model if outcome.reply else "")
        posts = list(outcome.posts)
        if outcome.text is not None:
            posts = await self.post(question, outcome.text, outcome.thread)
        self._note_posts(question, channel_id, [post for post in posts if post.id not in outcome.reused])
        if outcome.reply is None:
            what = "regenerating the answer" if outcome.regenerated else f"answer to message {question.id}"
            log.error("%s in channel %s failed", what, channel_id, exc_info=outcome.failure)
            return posts
        if not posts:
            return posts
        self._answered(question, posts, channel, conversation)
        self._keep_turn(outcome, outcome.reply.messages, channel_id, conversation)
        self.upkeep.compact_later(conversation)
        return posts

    def _keep_turn(
        self,
        outcome: AnswerOutcome,
        messages: list[ModelMessage],
        channel_id: int,
        conversation: ChannelConversation,
    ) -> None:
        """The answer's model history becomes the conversation's: the bot's turn recorded, or replacing the last.

        A private answer (admission.history_access) was written without the conversation's history, so its turn
        goes after it, and the messages it did not show are still news to the model.
        """
        if outcome.regenerated:
            self.manager.replace_last_bot_turn(channel_id, [*outcome.kept_before, *messages])
        elif outcome.private:
            history = [*conversation.llm_history, *messages]
            self.manager.record_bot_response(channel_id, history, conversation.prompted_through)
        else:
            self.manager.record_bot_response(channel_id, messages, outcome.question.id)

    async def deliver(
        self, message: discord.Message, text: str, where: discord.Thread | None = None
    ) -> list[discord.Message]:
        """Post `text` as `post` does and record the posts in the conversation: a notice, which is no answer."""
        posts = await self.post(message, text, where)
        self._note_posts(message, (where or message.channel).id, posts)
        return posts

    async def post(self, message: discord.Message, text: str, where: discord.Thread | None) -> list[discord.Message]:
        """Post `text` as a reply to `message` (or in `where`, the thread opened on it), split to Discord's limit;
        what was posted, up to a failure. Nothing is posted in an archived or locked thread: posting would reopen
        it."""
        posts: list[discord.Message] = []
        channel = where or message.channel
        if is_closed_thread(channel):
            log.info("not posting in thread %s: it was archived or locked meanwhile", channel.id)
            return posts
        try:
            for index, part in enumerate(split_message(text, max_posts=self.max_posts)):
                if index == 0 and where is not None:
                    # Inside the thread opened on it, the question is the thread's start: no reference is needed.
                    post = await channel.send(part, allowed_mentions=reply_mentions(message.author))
                elif index == 0:
                    post = await channel.send(
                        part,
                        reference=message.to_reference(fail_if_not_exists=False),
                        allowed_mentions=reply_mentions(message.author),
                    )
                else:
                    post = await channel.send(part)
                posts.append(post)
        except discord.HTTPException as error:
            log.error("could not post to channel %s: %s", channel.id, error)
        return posts

    def _note_posts(self, message: discord.Message, channel_id: int, posts: Iterable[discord.Message]) -> None:
        """Record the bot's posts answering `message` in the conversation of `channel_id`."""
        for post in posts:
            # Whom the post answers drives follow-up decisions; don't depend on Discord echoing it.
            self.manager.record_message(channel_id, replace(to_record(post), reply_to_author_id=message.author.id))

    def _answered(
        self,
        question: discord.Message,
        posts: list[discord.Message],
        channel: discord.abc.Messageable,
        conversation: ChannelConversation,
    ) -> None:
        """Note the channel's latest answer for "Regenerate": its messages at hand, their ids with the conversation
        (stored with its next change, which the caller makes)."""
        self.streams.answered(question, posts, channel)
        conversation.latest_answer = AnswerPosts(question.channel.id, question.id, tuple(post.id for post in posts))
