"""An answer's outcome, and the one tail every answer ends in: posted, recorded, compacted and accounted.

Whole, streamed and regenerated answers differ only in how their work runs (one model call then posts; posts edited
as the model writes; the latest answer's posts edited in place). What follows is the same for all three, so it is
written once, here: a whole answer's text is posted, the posts join the conversation, the tokens are counted, and an
answer that came is noted for "Regenerate", becomes the bot's turn in the model history (replacing the previous one
when regenerated) and may compact the history. The archive follows from these: the manager's listener stores the
conversation with its change, and Discord echoes the posts to `on_message`, which archives them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import discord
from pydantic_ai import RunUsage
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart

from admission.declined import Notice
from agent import Reply, ReplyFailed
from answering.delivery import Delivery
from answering.usage import UsageAccounting
from conversation import ChannelConversation, ConversationManager
from discord_io import image_files, is_closed_thread, split_message, to_record
from edge.asking import InteractionReply, MessageReply, Question
from edge.streaming import AnswerStreams, Outlet, Streamed
from helpdesk.feedback import SupportFeedback
from records import AnswerPosts
from tools.images import MadeImage
from upkeep.conversations import ConversationUpkeep
from usage.footer import answer_footer

log = logging.getLogger("parley")

APOLOGY = "Sorry, I couldn't come up with an answer just now. Please try again in a moment."
LOST = "Sorry, Discord would not take my answer to this just now, so it was lost. Please ask again."
# The "lost" line is tried for this many answer deadlines before it too is given up (logged).
LOST_LINE_DEADLINES = 10
# What ends the bot's turn in the model history when the member saw only the start of the answer.
CUT_NOTE = "(cut off here: Discord would not take the rest of this answer)"


@dataclass(frozen=True)
class AnswerOutcome:
    """What an answer's work produced: the reply (None when the model failed, with `failure`) and its posts.

    `text` is what is still to be posted (a whole answer's reply, or the apology); a streamed or regenerated
    answer's work posted already, into `posts`. `reused` are the posts a regenerated answer was written into,
    which the conversation holds already.
    """

    question: Question
    # Where the answer goes: a reply in the question's channel or the thread opened on it, a command's response.
    outlet: Outlet
    reply: Reply | None
    failure: ReplyFailed | None = None
    posts: Sequence[discord.Message] = ()
    text: str | None = None
    reused: frozenset[int] = frozenset()
    regenerated: bool = False
    # Regenerated: the model history kept before the turn it rewrites (a private view showed none of it).
    kept_before: Sequence[ModelMessage] = ()
    # A streamed answer some post or edit of which Discord did not take in time: its posts show part of it.
    broken: bool = False

    @classmethod
    def whole(cls, question: Question, outlet: Outlet, result: Reply | ReplyFailed) -> AnswerOutcome:
        """A reply the model wrote at once, or its failure, for the tail to post (the reply, or the apology)."""
        if isinstance(result, ReplyFailed):
            return cls(question, outlet, None, result, text=APOLOGY)
        return cls(question, outlet, result, text=result.text)

    @classmethod
    def streamed(cls, question: Question, outlet: Outlet, streamed: Streamed) -> AnswerOutcome:
        """An answer streamed into new posts (the apology, if the model failed)."""
        return cls(question, outlet, streamed.reply, streamed.failure, posts=streamed.posts, broken=streamed.broken)

    @classmethod
    def regenerated_into(
        cls,
        question: Question,
        outlet: Outlet,
        streamed: Streamed,
        reused: Iterable[discord.Message],
        *,
        kept_before: Sequence[ModelMessage],
    ) -> AnswerOutcome:
        """A new answer streamed into the posts of the previous one (`reused`), and more posts if it is longer."""
        kept = frozenset(post.id for post in reused)
        return cls(
            question,
            outlet,
            streamed.reply,
            streamed.failure,
            streamed.posts,
            reused=kept,
            regenerated=True,
            kept_before=kept_before,
            broken=streamed.broken,
        )

    @property
    def private(self) -> bool:
        """An answer to an asker without Read Message History (admission.history_access), written without the
        conversation's history: its turn goes after that history instead of replacing it."""
        return not self.question.reads_history

    @property
    def usage(self) -> RunUsage:
        """The tokens the work spent, answered or not."""
        if self.reply is not None:
            return self.reply.usage
        return self.failure.usage if self.failure is not None else RunUsage()


class AnswerTail:
    """The end of every answer (`finish`); `tell` posts a notice, which is no answer, the same way."""

    def __init__(
        self,
        manager: ConversationManager,
        streams: AnswerStreams,
        accounting: UsageAccounting,
        upkeep: ConversationUpkeep,
        *,
        max_posts: int,
        delivery: Delivery,
        footer_mode: Callable[[int], str],
        feedback: SupportFeedback,
    ) -> None:
        self.manager = manager
        self.streams = streams
        self.accounting = accounting
        self.upkeep = upkeep
        self.max_posts = max_posts
        self.delivery = delivery
        # What the answers in a channel show under them of what they spent (its profile's `footer`).
        self.footer_mode = footer_mode
        # The asker's Solved and Not helpful buttons under a support desk's answer.
        self.feedback = feedback
        # The "lost" lines still being tried, held so they are not collected mid-way.
        self._lost_lines: set[asyncio.Task[None]] = set()

    async def finish(self, outcome: AnswerOutcome, conversation: ChannelConversation) -> list[discord.Message]:
        """Post what is left to post, record the posts and the bot's turn, count the tokens, compact, and put the
        asker's feedback buttons under a support answer; the posts.

        The tokens are counted first, before anything is posted: the server's budget is then spent by the time
        anyone sees the answer. An answer only its asker sees (an ephemeral /ask) is no turn of the conversation:
        it is counted and posted, nothing more.
        """
        question, outlet = outcome.question, outcome.outlet
        channel_id = outlet.channel_id
        spent = self.accounting.account(
            question, outcome.usage, channel_id, outcome.reply.model if outcome.reply else ""
        )
        self._count_native_images(outcome)
        posts = list(outcome.posts)
        whole = True
        if outcome.text is not None:
            posts = await self.post(outlet, outcome.text, images=outcome.reply.images if outcome.reply else ())
            whole = len(posts) == len(split_message(outcome.text, max_posts=self.max_posts))
        whole = whole and not outcome.broken
        if not (posts and whole) and (posts or not isinstance(outlet, InteractionReply)):
            # The member is told; what they saw of the answer, if anything, is all the conversation records of it.
            # A command's response that never came is told by the command, privately (answering/asked.py).
            self._tell_lost(question, outlet)
        if outlet.public:
            self._note_posts(question.asker_id, channel_id, [post for post in posts if post.id not in outcome.reused])
        if outcome.reply is None:
            what = "regenerating the answer" if outcome.regenerated else f"answer to message {question.id}"
            log.error("%s in channel %s failed", what, channel_id, exc_info=outcome.failure)
            return posts
        if posts:
            await self._show_spent(posts[-1], answer_footer(self.footer_mode(channel_id), spent))
        if not posts or not outlet.public:
            return posts  # nothing went out, or only to the asker: the next message is decided as if it never was
        messages = outcome.reply.messages if whole else as_shown(outcome.reply.messages, posts)
        self._answered(question, posts, outlet, conversation)
        self._keep_turn(outcome, messages, channel_id, conversation)
        self.upkeep.compact_later(conversation)
        if question.support is not None and whole:
            await self.feedback.offer(question.support, posts[-1])
        return posts

    async def _show_spent(self, post: discord.Message, footer: str | None) -> None:
        """Put the answer's footer under its last post: an embed's footer, so it is no part of the text the
        conversation, the archive and the model read back. Whole, streamed, regenerated and /ask answers alike."""
        if footer is None:
            return
        shown = discord.Embed().set_footer(text=footer)
        await self.delivery.attempt(functools.partial(post.edit, embed=shown), f"the footer of message {post.id}")

    def _count_native_images(self, outcome: AnswerOutcome) -> None:
        """Count the images the answer model's own tool drew (Parley's image tool counted its own as it made them)."""
        drawn = sum(not image.counted for image in outcome.reply.images) if outcome.reply is not None else 0
        if drawn and outcome.reply is not None:
            channel_id = outcome.outlet.channel_id
            self.accounting.account_image(outcome.question, channel_id, None, images=drawn, model=outcome.reply.model)

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

    def _tell_lost(self, question: Question, outlet: Outlet) -> None:
        """Post the "lost" line for an answer that could not be posted, once Discord takes posts again: in the
        background, so the channel's next turn need not wait for Discord to recover. Nothing of the lost answer
        was recorded, so the conversation decides the next message as if it never went out."""
        if is_closed_thread(outlet.channel):
            return  # the thread was closed meanwhile: nothing was lost to Discord, and posting would reopen it
        task = asyncio.create_task(self._post_lost_line(question, outlet))
        self._lost_lines.add(task)
        task.add_done_callback(self._lost_lines.discard)

    async def _post_lost_line(self, question: Question, outlet: Outlet) -> None:
        try:
            posts = await self.post(outlet, LOST, seconds=self.delivery.seconds * LOST_LINE_DEADLINES)
        except RuntimeError:  # the client closed meanwhile: there is no one to tell
            posts = []
        if outlet.public:
            self._note_posts(question.asker_id, outlet.channel_id, posts)
        if not posts:
            log.error("the answer to message %s was lost, and so was the line saying so", question.id)

    async def tell(self, notice: Notice) -> list[discord.Message]:
        """Post a line admission decided a member is told (`admission.declined.Notice`) as `post` does, through the
        delivery's retries, replying to their message (in the thread opened on it, if the notice says so); the
        conversation records it only if the notice is `kept`, since it is no answer. The one way a notice is said."""
        outlet = MessageReply.to(notice.message, notice.where)
        posts = await self.post(outlet, notice.line)
        if notice.kept:
            self._note_posts(notice.message.author.id, outlet.channel_id, posts)
        return posts

    async def post(
        self, outlet: Outlet, text: str, *, seconds: float | None = None, images: Sequence[MadeImage] = ()
    ) -> list[discord.Message]:
        """Post `text` through `outlet`, split to Discord's limit, the last part with the `images` the answer made
        attached, each part tried until Discord takes it or the delivery deadline (`seconds`, else the setting) has
        passed; what was posted, up to a failure. Nothing is posted in an archived or locked thread: posting would
        reopen it."""
        posts: list[discord.Message] = []
        if is_closed_thread(outlet.channel):
            log.info("not posting in thread %s: it was archived or locked meanwhile", outlet.channel_id)
            return posts
        parts = split_message(text, max_posts=self.max_posts)
        for index, part in enumerate(parts):
            attached = images if index == len(parts) - 1 else ()
            post = await self.delivery.attempt(
                functools.partial(_send_with, outlet, part, first=index == 0, images=attached),
                f"to channel {outlet.channel_id}",
                seconds,
            )
            if post is None:
                break
            posts.append(post)
        return posts

    def _note_posts(self, asker_id: int, channel_id: int, posts: Iterable[discord.Message]) -> None:
        """Record the bot's posts answering `asker_id` in the conversation of `channel_id`."""
        for post in posts:
            # Whom the post answers drives follow-up decisions; don't depend on Discord echoing it.
            self.manager.record_message(channel_id, replace(to_record(post), reply_to_author_id=asker_id))

    def _answered(
        self, question: Question, posts: list[discord.Message], outlet: Outlet, conversation: ChannelConversation
    ) -> None:
        """Note the channel's latest answer for "Regenerate": its messages at hand, their ids with the conversation
        (stored with its next change, which the caller makes). Regenerate fetches the question's message again:
        a command's answer, which has none, is not regenerated, and no earlier answer may be in its place."""
        if question.message is None:
            self.streams.forget_latest(outlet.channel_id)
            conversation.latest_answer = None
            return
        self.streams.answered(question.message, posts, outlet.channel)
        post_ids = tuple(post.id for post in posts)
        conversation.latest_answer = AnswerPosts(question.message.channel.id, question.id, post_ids)


async def _send_with(outlet: Outlet, part: str, *, first: bool, images: Sequence[MadeImage]) -> discord.Message:
    """One part of an answer, sent with its images as new files (a file is read once it is sent, and a try may
    be made again)."""
    return await outlet.send(part, first=first, files=image_files(images))


def as_shown(messages: Sequence[ModelMessage], posts: Sequence[discord.Message]) -> list[ModelMessage]:
    """An answer's model history with its final text as the member saw it: what its posts show (the start of the
    answer, where Discord stopped taking posts or edits), marked cut off, so the model knows what was said."""
    shown = "\n".join(post.content for post in posts)
    text = TextPart(f"{shown}\n\n{CUT_NOTE}")
    if messages and isinstance(messages[-1], ModelResponse):
        return [*messages[:-1], replace(messages[-1], parts=[text])]
    return [*messages, ModelResponse(parts=[text])]
