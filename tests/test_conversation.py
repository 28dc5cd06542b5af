"""Tests for the conversation engine: the manager's lifetime rules and the decider's tiers."""

from __future__ import annotations

import ast
import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time
from pydantic_ai.framing import wrap
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

# The engine as the project's design names it: the conversations and the decider, over the messages.
from conversation import ChannelConversation, ConversationManager, MessageRecord, ResponseDecider
from deciding.followup import SHIPPED_MODEL, load_model
from prompting.quoting import MESSAGE_TAG
from records import DIRECT, MENTION_ONLY, NORMAL, OWN_THREAD, Decision
from upkeep.conversation_snapshots import restore, snapshot

BOT = 1
ALICE = 10
BOB = 11
OTHER_BOT = 99
CHANNEL = 500
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

_ids = iter(range(1000, 10**9))


def msg(
    author_id: int = ALICE,
    content: str = "hello there",
    *,
    at: datetime | None = None,
    channel_id: int = CHANNEL,
    mentions: frozenset[int] = frozenset(),
    reply_to: int | None = None,
    is_bot: bool = False,
    by_name: bool = False,
) -> MessageRecord:
    return MessageRecord(
        message_id=next(_ids),
        channel_id=channel_id,
        author_id=author_id,
        author=f"user{author_id}",
        content=content,
        timestamp=at or datetime.now(UTC),
        is_bot=is_bot,
        mention_ids=mentions,
        reply_to_author_id=reply_to,
        called_by_name=by_name,
    )


class Clock:
    """A hand-driven clock, as a replay drives the engine from message timestamps."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def manager(clock: Clock) -> ConversationManager:
    return ConversationManager(timeout_seconds=60, clock=clock)


@pytest.fixture
def decider(clock: Clock) -> ResponseDecider:
    return ResponseDecider(followup_window_seconds=60, clock=clock)


def engaged(manager: ConversationManager, clock: Clock, answered: int = ALICE) -> ChannelConversation:
    """A conversation in which `answered` mentioned the bot and the bot replied to them."""
    manager.start(CHANNEL, [])
    manager.record_message(
        CHANNEL, msg(answered, "<@1> how do I mount a disk?", at=clock.now, mentions=frozenset({BOT}))
    )
    clock.advance(5)
    conversation = manager.record_message(
        CHANNEL, msg(BOT, "Use `mount`.", at=clock.now, reply_to=answered, is_bot=True)
    )
    assert conversation is not None
    clock.advance(5)
    return conversation


# --- ConversationManager ----------------------------------------------------------------------


def test_conversation_expires_after_timeout(manager: ConversationManager, clock: Clock) -> None:
    """A conversation idle for longer than the timeout is gone."""
    manager.start(CHANNEL, [])
    clock.advance(60)
    assert manager.get(CHANNEL) is not None
    clock.advance(1)
    assert manager.get(CHANNEL) is None


# Slow: freezegun's first use in a process walks every loaded module (3 to 4 s once the bot's are loaded).
@pytest.mark.slow
def test_default_clock_follows_freezegun() -> None:
    """Without an injected clock the manager reads the current time at call time."""
    with freeze_time("2026-01-01 12:00:00") as frozen:
        manager = ConversationManager(timeout_seconds=60)
        manager.start(CHANNEL, [])
        frozen.tick(timedelta(seconds=61))
        assert manager.get(CHANNEL) is None


def test_any_message_bumps_timeout(manager: ConversationManager, clock: Clock) -> None:
    """A message the bot does not answer still keeps the conversation alive."""
    conversation = manager.start(CHANNEL, [])
    original = conversation.last_activity
    clock.advance(50)
    manager.record_message(CHANNEL, msg(BOB, "unrelated chatter", at=clock.now))
    assert conversation.last_activity > original
    clock.advance(50)
    assert manager.get(CHANNEL) is conversation


def test_channels_are_isolated(manager: ConversationManager, clock: Clock) -> None:
    """Activity in one channel neither feeds nor extends another's conversation."""
    manager.start(CHANNEL, [])
    manager.start(CHANNEL + 1, [])
    clock.advance(40)
    manager.record_message(CHANNEL + 1, msg(ALICE, "hi", channel_id=CHANNEL + 1, at=clock.now))
    clock.advance(30)
    assert manager.get(CHANNEL) is None
    other = manager.get(CHANNEL + 1)
    assert other is not None and [m.content for m in other.messages] == ["hi"]


def test_end_ends_the_conversation(manager: ConversationManager) -> None:
    """`end` removes the conversation at once, and ending a missing one is harmless."""
    manager.start(CHANNEL, [])
    assert manager.end(CHANNEL) is not None
    assert manager.get(CHANNEL) is None
    assert manager.end(CHANNEL) is None


def test_record_without_conversation_keeps_nothing(manager: ConversationManager) -> None:
    """Messages in a channel with no conversation are not stored by the engine."""
    assert manager.record_message(CHANNEL, msg()) is None
    assert len(manager) == 0


def test_start_keeps_initial_messages_as_context(manager: ConversationManager, clock: Clock) -> None:
    """Earlier channel messages seed the transcript but do not make their authors participants."""
    earlier = [msg(BOB, "earlier", at=clock.now - timedelta(minutes=5))]
    conversation = manager.start(CHANNEL, earlier)
    manager.record_message(CHANNEL, msg(ALICE, "<@1> hi", at=clock.now, mentions=frozenset({BOT})))
    assert [m.content for m in conversation.messages] == ["earlier", "<@1> hi"]
    assert conversation.participants == {ALICE}


def test_bot_messages_are_kept_but_are_not_participants(manager: ConversationManager, clock: Clock) -> None:
    """The bot's own posts are part of the transcript, but participants are people."""
    conversation = engaged(manager, clock)
    assert conversation.messages[-1].author_id == BOT
    assert conversation.participants == {ALICE}


def test_record_bot_response_stores_history(manager: ConversationManager, clock: Clock) -> None:
    """A successful answer replaces the model history and counts a turn."""
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    manager.start(CHANNEL, [])
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(content="hi")])]
    manager.record_bot_response(CHANNEL, history, answered_id=77)
    conversation = manager.get(CHANNEL)
    assert conversation is not None
    assert conversation.llm_history == history and conversation.llm_history is not history
    assert conversation.bot_turns == 1
    assert conversation.prompted_through == 77


def test_expired_conversations_are_evicted_without_their_channel_speaking(clock: Clock) -> None:
    """Dead conversations are dropped even if their channels never speak again."""
    manager = ConversationManager(timeout_seconds=60, clock=clock)
    for channel in range(10_000):
        manager.start(channel, [])
    assert len(manager) == 10_000
    clock.advance(61)
    manager.start(20_000, [])
    assert len(manager) == 1


def test_message_count_is_bounded_in_a_channel_that_never_falls_silent(clock: Clock) -> None:
    """A never-silent channel keeps only the newest `max_messages` messages in memory."""
    manager = ConversationManager(timeout_seconds=60, max_messages=50, clock=clock)
    manager.start(CHANNEL, [msg(BOB, f"old {i}") for i in range(100)])
    for i in range(1000):
        clock.advance(1)
        manager.record_message(CHANNEL, msg(ALICE, f"message {i}", at=clock.now))
    conversation = manager.get(CHANNEL)
    assert conversation is not None
    assert len(conversation.messages) == 50
    assert conversation.messages[0].content == "message 950"
    assert conversation.messages[-1].content == "message 999"


def test_unseen_messages_are_those_no_answer_showed(manager: ConversationManager, clock: Clock) -> None:
    """Before an answer is recorded its question is unseen; after it, only what came after the question."""
    conversation = engaged(manager, clock)
    question = conversation.messages[0]
    assert [m.content for m in conversation.unseen_before(10**12, BOT)] == [question.content]
    manager.record_bot_response(CHANNEL, [], answered_id=question.message_id)
    manager.record_message(CHANNEL, one := msg(BOB, "one", at=clock.now))
    manager.record_message(CHANNEL, msg(ALICE, "two", at=clock.now))
    assert [m.content for m in conversation.unseen_before(10**12, BOT)] == ["one", "two"]
    assert conversation.unseen_before(one.message_id, BOT) == []


def test_the_bots_own_posts_are_unseen_only_from_the_loaded_context(manager: ConversationManager, clock: Clock) -> None:
    """The bot's earlier turn loaded as context reaches the model; its posts in this conversation are its history."""
    earlier_question = msg(ALICE, "how do I mount?", at=clock.now)
    earlier_answer = msg(BOT, "Use `mount`.", at=clock.now, reply_to=ALICE, is_bot=True)
    conversation = manager.start(CHANNEL, [earlier_question, earlier_answer])
    manager.record_message(CHANNEL, trigger := msg(ALICE, "and for staging?", at=clock.now))
    assert [m.content for m in conversation.unseen_before(trigger.message_id, BOT)] == [
        "how do I mount?",
        "Use `mount`.",
    ]
    manager.record_bot_response(CHANNEL, [], answered_id=trigger.message_id)
    manager.record_message(CHANNEL, msg(BOT, "Same, on staging.", at=clock.now, reply_to=ALICE, is_bot=True))
    manager.record_message(CHANNEL, msg(BOB, "thanks", at=clock.now))
    assert [m.content for m in conversation.unseen_before(10**12, BOT)] == ["thanks"]


# --- ResponseDecider: starting ----------------------------------------------------------------


def test_mention_starts_a_conversation(decider: ResponseDecider) -> None:
    """An @mention of the bot starts a conversation."""
    assert decider.should_start_conversation(msg(mentions=frozenset({BOT})), BOT) == (True, "mention")


def test_reply_to_bot_starts_a_conversation(decider: ResponseDecider) -> None:
    """A reply to one of the bot's messages starts a conversation."""
    assert decider.should_start_conversation(msg(reply_to=BOT), BOT) == (True, "reply_to_bot")


def test_a_call_by_name_starts_a_conversation_except_in_mention_only_channels(clock: Clock) -> None:
    """ "parley, …" starts a conversation like a mention; a mention-only channel waits for a real @mention."""
    modes = {CHANNEL: NORMAL}
    decider = ResponseDecider(followup_window_seconds=60, clock=clock, modes=modes)
    assert decider.should_start_conversation(msg(by_name=True), BOT) == (True, "called_by_name")
    modes[CHANNEL] = MENTION_ONLY
    assert decider.should_start_conversation(msg(by_name=True), BOT) == (False, "no_conversation")
    assert decider.should_start_conversation(msg(mentions=frozenset({BOT})), BOT) == (True, "mention")


async def test_a_call_by_name_is_answered_mid_conversation_and_can_be_switched_off(
    manager: ConversationManager, clock: Clock
) -> None:
    """Outside the follow-up window a call by name is still answered; `disabled_rules` turns the rule off (replay's
    ablation), and a bot's message is never taken as one."""
    conversation = engaged(manager, clock, answered=BOB)
    clock.advance(600)
    decider = ResponseDecider(followup_window_seconds=60, clock=clock)
    assert await decider.should_respond(msg(by_name=True, at=clock.now), conversation, BOT) == (True, "called_by_name")
    assert (await decider.should_respond(msg(by_name=True, at=clock.now, is_bot=True), conversation, BOT))[0] is False
    off = ResponseDecider(followup_window_seconds=60, clock=clock, disabled_rules={"called_by_name"})
    assert (await off.should_respond(msg(by_name=True, at=clock.now), conversation, BOT))[0] is False


def test_chatter_does_not_start_a_conversation(decider: ResponseDecider) -> None:
    """Ordinary chatter, or a mention of someone else, starts nothing."""
    assert decider.should_start_conversation(msg(), BOT) == (False, "no_conversation")
    assert decider.should_start_conversation(msg(mentions=frozenset({BOB})), BOT) == (False, "no_conversation")


# --- ResponseDecider: tiers inside a conversation ---------------------------------------------


async def test_mention_is_always_answered(manager: ConversationManager, decider: ResponseDecider, clock: Clock) -> None:
    """A mention is answered even outside the follow-up window and amid other mentions."""
    conversation = engaged(manager, clock)
    clock.advance(600)
    message = msg(BOB, "<@1> <@10> thoughts?", at=clock.now, mentions=frozenset({BOT, ALICE}))
    assert await decider.should_respond(message, conversation, BOT) == (True, "mention")


async def test_reply_to_bot_is_answered(manager: ConversationManager, decider: ResponseDecider, clock: Clock) -> None:
    """A reply to the bot is answered whoever sends it."""
    conversation = engaged(manager, clock)
    message = msg(BOB, "that's wrong", at=clock.now, reply_to=BOT)
    assert await decider.should_respond(message, conversation, BOT) == (True, "reply_to_bot")


async def test_message_addressed_to_someone_else_is_left_alone(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock
) -> None:
    """Mentioning or replying to another person is not for the bot, even from its interlocutor."""
    conversation = engaged(manager, clock)
    mention = msg(ALICE, "<@11> did that work for you?", at=clock.now, mentions=frozenset({BOB}))
    reply = msg(ALICE, "did that work for you?", at=clock.now, reply_to=BOB)
    assert await decider.should_respond(mention, conversation, BOT) == (False, "addressed_to_other")
    assert await decider.should_respond(reply, conversation, BOT) == (False, "reply_to_other")


async def test_other_bots_are_left_alone(manager: ConversationManager, decider: ResponseDecider, clock: Clock) -> None:
    """Another bot's message is never answered without an explicit trigger."""
    conversation = engaged(manager, clock)
    message = msg(OTHER_BOT, "beep", at=clock.now, is_bot=True)
    assert await decider.should_respond(message, conversation, BOT) == (False, "other_bot")


async def test_followup_inside_window_is_answered(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock
) -> None:
    """The person the bot just answered, continuing without an @mention, gets an answer."""
    conversation = engaged(manager, clock)
    message = msg(ALICE, "which filesystem should I pick", at=clock.now)
    assert await decider.should_respond(message, conversation, BOT) == (True, "followup")


async def test_followup_outside_window_is_not_answered(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock
) -> None:
    """The same follow-up after the window has closed is left alone."""
    conversation = engaged(manager, clock)
    clock.advance(61)
    message = msg(ALICE, "which filesystem should I pick", at=clock.now)
    assert await decider.should_respond(message, conversation, BOT) == (False, "outside_window")


async def test_bystander_is_not_answered(manager: ConversationManager, decider: ResponseDecider, clock: Clock) -> None:
    """Someone the bot was not talking to, chatting inside the window, is left alone."""
    conversation = engaged(manager, clock)
    message = msg(BOB, "anyone watching the game tonight?", at=clock.now)
    assert await decider.should_respond(message, conversation, BOT) == (False, "not_for_bot")


async def test_silent_bot_has_no_followups(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock
) -> None:
    """Before the bot has said anything, nothing is a follow-up."""
    conversation = manager.start(CHANNEL, [])
    assert await decider.should_respond(msg(ALICE, "so?", at=clock.now), conversation, BOT) == (False, "bot_silent")


# --- ResponseDecider: the judge ---------------------------------------------------------------


class RecordingJudge:
    """A judge that records what it was asked and answers as told."""

    def __init__(
        self, verdict: tuple[bool, str, float] | Exception = (True, "continues the thread", 0.9), delay: float = 0.0
    ) -> None:
        self.verdict = verdict
        self.delay = delay
        self.asked: list[MessageRecord] = []

    async def __call__(self, message: MessageRecord, conversation: ChannelConversation) -> tuple[bool, str, float]:
        self.asked.append(message)
        await asyncio.sleep(self.delay)
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict


async def test_judge_is_asked_only_about_ambiguous_messages(manager: ConversationManager, clock: Clock) -> None:
    """Clear-cut messages never reach the judge; the ambiguous one does and its verdict stands."""
    judge = RecordingJudge()
    decider = ResponseDecider(followup_window_seconds=60, judge=judge, clock=clock)
    conversation = engaged(manager, clock)
    clear_cut = [
        msg(BOB, "<@1> hi", at=clock.now, mentions=frozenset({BOT})),
        msg(BOB, "<@10> hi", at=clock.now, mentions=frozenset({ALICE})),
        msg(ALICE, "and for ext4?", at=clock.now),
    ]
    for message in clear_cut:
        await decider.should_respond(message, conversation, BOT)
    assert judge.asked == []
    ambiguous = msg(BOB, "is that the same on fedora", at=clock.now)
    assert await decider.should_respond(ambiguous, conversation, BOT) == (True, "judge_yes")
    assert judge.asked == [ambiguous]
    assert decider.judge_calls == 1


async def test_judge_confidence_and_words_are_kept(manager: ConversationManager, clock: Clock) -> None:
    """`decide` keeps the judge's confidence and its own explanation for operators."""
    decider = ResponseDecider(judge=RecordingJudge((False, "side talk", 0.3)), clock=clock)
    conversation = engaged(manager, clock)
    decision = await decider.decide(msg(BOB, "lol", at=clock.now), conversation, BOT)
    assert decision == Decision(False, "judge_no", "judge", 0.3, "side talk")


async def test_judge_error_means_no_answer(manager: ConversationManager, clock: Clock) -> None:
    """A judge that raises leads to silence, with a reason saying so."""
    decider = ResponseDecider(judge=RecordingJudge(RuntimeError("provider down")), clock=clock)
    conversation = engaged(manager, clock)
    assert await decider.should_respond(msg(BOB, "hm", at=clock.now), conversation, BOT) == (False, "judge_error")


async def test_judge_timeout_means_no_answer(manager: ConversationManager, clock: Clock) -> None:
    """A judge slower than its timeout leads to silence, with a reason saying so."""
    decider = ResponseDecider(judge=RecordingJudge(delay=1.0), judge_timeout_seconds=0.01, clock=clock)
    conversation = engaged(manager, clock)
    assert await decider.should_respond(msg(BOB, "hm", at=clock.now), conversation, BOT) == (False, "judge_timeout")


async def test_decide_now_gives_the_async_paths_decisions_and_journal(
    manager: ConversationManager, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The synchronous path decides, tells its listener and logs each message exactly as `decide` does."""
    seen: dict[str, list[tuple[int, Decision]]] = {"now": [], "async": []}

    def listening(path: str) -> ResponseDecider:
        decider = ResponseDecider(followup_window_seconds=60, clock=clock, learned=load_model(SHIPPED_MODEL))
        decider.on_decision = lambda message, decision: seen[path].append((message.message_id, decision))
        return decider

    now, awaited = listening("now"), listening("async")
    conversation = engaged(manager, clock)
    messages = [
        msg(ALICE, "and for ext4?", at=clock.now),
        msg(BOB, "<@1> hi", at=clock.now, mentions=frozenset({BOT})),
        msg(BOB, "<@10> hi", at=clock.now, mentions=frozenset({ALICE})),
        msg(ALICE, "what about btrfs then, does it need anything?", at=clock.now),
        msg(BOB, "lol", at=clock.now),
    ]
    with caplog.at_level(logging.INFO, logger="parley.decisions"):
        for message in messages:
            manager.record_message(CHANNEL, message)
            assert now.decide_now(message, conversation, BOT) == await awaited.decide(message, conversation, BOT)
    assert seen["now"] == seen["async"]
    assert {decision.tier for _, decision in seen["now"]} >= {"explicit", "gate", "followup", "learned"}
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0::2] == lines[1::2] and len(lines) == 2 * len(messages)


async def test_decide_now_leaves_the_judge_to_be_awaited(manager: ConversationManager, clock: Clock) -> None:
    """A message the judge must weigh gets its call to await, decided and told to the listener only then."""
    judge = RecordingJudge((True, "continues the thread", 0.9))
    seen: list[Decision] = []
    decider = ResponseDecider(
        followup_window_seconds=60, judge=judge, clock=clock, on_decision=lambda m, d: seen.append(d)
    )
    conversation = engaged(manager, clock)
    assert decider.decide_now(msg(ALICE, "and for ext4?", at=clock.now), conversation, BOT) == Decision(
        True, "followup", "followup"
    )
    ambiguous = msg(BOB, "is that the same on fedora", at=clock.now)
    call = decider.decide_now(ambiguous, conversation, BOT)
    assert not isinstance(call, Decision)
    assert [d.reason for d in seen] == ["followup"]
    assert await call == Decision(True, "judge_yes", "judge", 0.9, "continues the thread")
    assert judge.asked == [ambiguous]
    assert [d.reason for d in seen] == ["followup", "judge_yes"]


# --- Logging and pluggability -----------------------------------------------------------------


async def test_every_decision_is_logged_with_its_reason(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """Each decision is one structured log record carrying channel, message, author, reason and tier."""
    conversation = engaged(manager, clock)
    message = msg(BOB, "anyone around?", at=clock.now)
    with caplog.at_level(logging.INFO, logger="parley.decisions"):
        await decider.should_respond(message, conversation, BOT)
    [record] = caplog.records
    fields = record.__dict__  # the record's `extra` attributes
    assert (fields["channel_id"], fields["message_id"], fields["author_id"]) == (CHANNEL, message.message_id, BOB)
    assert (fields["respond"], fields["reason"], fields["tier"]) == (False, "not_for_bot", "followup")
    assert "ignore" in record.getMessage() and "not_for_bot" in record.getMessage()


async def test_decision_listener_sees_every_decision(manager: ConversationManager, clock: Clock) -> None:
    """An `on_decision` listener receives each decision, for per-channel audit buffers."""
    seen: list[tuple[int, Decision]] = []
    decider = ResponseDecider(clock=clock, on_decision=lambda m, d: seen.append((m.message_id, d)))
    conversation = engaged(manager, clock)
    start = msg(BOB)
    decider.should_start_conversation(start, BOT)
    follow = msg(ALICE, "thanks!", at=clock.now)
    await decider.should_respond(follow, conversation, BOT)
    assert [(mid, d.reason) for mid, d in seen] == [
        (start.message_id, "no_conversation"),
        (follow.message_id, "followup"),
    ]


def test_conversation_module_imports_nothing_from_discord() -> None:
    """The engine stays free of discord imports, so replays and tests drive it directly."""
    source = Path(__file__).resolve().parents[1].joinpath("conversation.py").read_text()
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert "discord" not in imported
    assert imported  # the walk itself found the module's imports


def test_late_recorded_message_takes_its_place_by_id(manager: ConversationManager, clock: Clock) -> None:
    """The bot's post recorded after a message that overtook it still sits before that message."""
    conversation = manager.start(CHANNEL, [])
    question = msg(ALICE, "q", at=clock.now)
    bot_post = msg(BOT, "a", at=clock.now, is_bot=True, reply_to=ALICE)
    overtaking = msg(BOB, "meanwhile", at=clock.now)
    for message in (question, overtaking, bot_post):
        manager.record_message(CHANNEL, message)
    assert [m.content for m in conversation.messages] == ["q", "a", "meanwhile"]
    manager.record_bot_response(CHANNEL, [], answered_id=question.message_id)
    assert [m.content for m in conversation.unseen_before(10**12, BOT)] == ["meanwhile"]


def test_late_message_into_a_full_transcript_keeps_the_bound(clock: Clock) -> None:
    """Slotting a late message into a full transcript drops the oldest, never exceeding the bound."""
    manager = ConversationManager(timeout_seconds=60, max_messages=3, clock=clock)
    first, second, third, fourth = (msg(ALICE, str(i), at=clock.now) for i in range(4))
    conversation = manager.start(CHANNEL, [first, second, fourth])
    manager.record_message(CHANNEL, third)
    assert [m.content for m in conversation.messages] == ["1", "2", "3"]


def test_expiry_holds_when_the_clock_steps_back(manager: ConversationManager, clock: Clock) -> None:
    """A replayed log whose clock steps back (12:59 -> 01:00) still expires idle conversations."""
    manager.start(CHANNEL, [])
    clock.advance(-12 * 3600)
    manager.start(CHANNEL + 1, [])
    clock.advance(61)
    assert manager.get(CHANNEL + 1) is None
    assert manager.get(CHANNEL) is not None  # its last activity is still in this clock's future


async def test_followup_look_back_is_bounded(clock: Clock) -> None:
    """A bot turn further back than the look-back is not followed up; one inside it still is."""
    manager = ConversationManager(timeout_seconds=600, clock=clock)
    decider = ResponseDecider(followup_window_seconds=600, clock=clock, followup_scan_messages=5)
    conversation = engaged(manager, clock)
    for i in range(5):
        manager.record_message(CHANNEL, msg(BOB, f"chatter {i}", at=clock.now))
    late = msg(ALICE, "one more question", at=clock.now)
    manager.record_message(CHANNEL, late)
    assert await decider.should_respond(late, conversation, BOT) == (False, "not_for_bot")

    conversation = engaged(manager, clock)
    for i in range(4):
        manager.record_message(CHANNEL, msg(BOB, f"chatter {i}", at=clock.now))
    in_reach = msg(ALICE, "one more question", at=clock.now)
    manager.record_message(CHANNEL, in_reach)
    assert await decider.should_respond(in_reach, conversation, BOT) == (True, "followup")


async def test_message_without_text_is_left_alone(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock
) -> None:
    """An attachment-only message (no text) from the person the bot answered is not a follow-up."""
    conversation = engaged(manager, clock)
    assert await decider.should_respond(msg(ALICE, "   ", at=clock.now), conversation, BOT) == (False, "no_text")


async def test_only_the_first_message_after_the_bot_is_a_followup(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock
) -> None:
    """The person's first message after the bot's turn is answered; their next one is not."""
    conversation = engaged(manager, clock)
    first = msg(ALICE, "thanks, that worked", at=clock.now)
    manager.record_message(CHANNEL, first)
    assert await decider.should_respond(first, conversation, BOT) == (True, "followup")
    second = msg(ALICE, "now on to the next thing", at=clock.now)
    manager.record_message(CHANNEL, second)
    assert await decider.should_respond(second, conversation, BOT) == (False, "already_followed_up")


async def test_someone_cutting_in_ends_the_followup(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock
) -> None:
    """Once someone else addresses the person, their next message is for that someone, not the bot."""
    conversation = engaged(manager, clock)
    manager.record_message(CHANNEL, msg(BOB, "<@10> try ext4", at=clock.now, mentions=frozenset({ALICE})))
    answer = msg(ALICE, "ok will do", at=clock.now)
    manager.record_message(CHANNEL, answer)
    assert await decider.should_respond(answer, conversation, BOT) == (False, "cut_in")


async def test_unnamed_answer_to_a_question_is_followed_up(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock
) -> None:
    """A bot turn naming nobody, right after someone's question to it, counts as answering them."""
    conversation = manager.start(CHANNEL, [])
    manager.record_message(CHANNEL, msg(ALICE, "<@1> what is ext4?", at=clock.now, mentions=frozenset({BOT})))
    manager.record_message(CHANNEL, msg(BOT, "A Linux filesystem.", at=clock.now, is_bot=True))
    followup = msg(ALICE, "is it journaled", at=clock.now)
    manager.record_message(CHANNEL, followup)
    assert await decider.should_respond(followup, conversation, BOT) == (True, "followup_implicit")
    bystander = msg(BOB, "is it journaled", at=clock.now)
    manager.record_message(CHANNEL, bystander)
    assert await decider.should_respond(bystander, conversation, BOT) == (False, "not_for_bot")


def test_edits_and_deletions_rewrite_the_record_and_the_model_history(
    manager: ConversationManager, clock: Clock
) -> None:
    """An edited message reads as it now stands and a deleted one is gone, in records and in quoted history."""
    conversation = manager.start(CHANNEL, [])
    secret, plan = msg(BOB, "my password is hunter2", at=clock.now), msg(ALICE, "deploy to staging-1", at=clock.now)
    for message in (secret, plan):
        manager.record_message(CHANNEL, message)
    prompt = "\n".join(wrap(MESSAGE_TAG, m.content, message_id=str(m.message_id)) for m in (secret, plan))
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(prompt)]),
        ModelResponse(parts=[TextPart("noted: staging-1")]),
    ]
    manager.record_bot_response(CHANNEL, history, answered_id=plan.message_id)

    assert conversation.delete(secret.message_id) and conversation.edit(plan.message_id, "deploy to staging-2")
    assert not conversation.delete(10**12)  # never seen: nothing to do
    assert [m.content for m in conversation.messages] == ["deploy to staging-2"]
    sent = first_prompt(conversation.llm_history)
    assert "hunter2" not in sent and "staging-1" not in sent and "staging-2" in sent
    assert conversation.llm_history[1] == history[1]  # the model's own words stay as written
    assert first_prompt(history) == prompt  # the old history object is not changed in place

    # An answer written while the edit happened brings the old text back; recording it applies the edit again.
    manager.record_bot_response(CHANNEL, history, answered_id=plan.message_id)
    assert "hunter2" not in first_prompt(conversation.llm_history)


def first_prompt(history: list[ModelMessage]) -> str:
    [part] = history[0].parts
    assert isinstance(part, UserPromptPart) and isinstance(part.content, str)
    return part.content


# --- Conversation kinds: threads Parley opened, direct messages ---------------------------------


def test_a_thread_parley_opened_outlives_the_timeout(manager: ConversationManager, clock: Clock) -> None:
    """A conversation of kind own_thread is still live long past the inactivity timeout; a channel's is not."""
    manager.start(CHANNEL, [], kind=OWN_THREAD)
    manager.start(CHANNEL + 1, [])
    clock.advance(3600)
    assert manager.evict_expired() == 1
    assert manager.get(CHANNEL) is not None and manager.get(CHANNEL + 1) is None
    assert manager.record_message(CHANNEL, msg(at=clock.now)) is not None
    assert len(manager) == 1


def test_an_open_thread_ends_only_when_ended(clock: Clock) -> None:
    """Ending a thread's conversation tells the end listener it did not time out, and it is gone."""
    ended: list[tuple[int, bool]] = []
    manager = ConversationManager(60, clock=clock, on_end=lambda c, expired: ended.append((c.channel_id, expired)))
    manager.start(CHANNEL, [], kind=OWN_THREAD)
    clock.advance(600)
    manager.evict_expired()
    assert ended == []
    manager.end(CHANNEL)
    assert ended == [(CHANNEL, False)] and manager.get(CHANNEL) is None


@pytest.mark.parametrize(("kind", "reason"), [(OWN_THREAD, "own_thread"), (DIRECT, "direct_message")])
async def test_every_message_past_the_gates_is_answered_in_a_thread_or_dm(
    manager: ConversationManager, decider: ResponseDecider, clock: Clock, kind: str, reason: str
) -> None:
    """Without a mention or a follow-up window, a message in Parley's thread or a DM is answered, with its reason."""
    conversation = manager.start(CHANNEL, [], kind=kind)
    clock.advance(3600)
    decision = await decider.decide(msg(BOB, "and what about ext4?", at=clock.now), conversation, BOT)
    assert (decision.respond, decision.reason) == (True, reason)


@pytest.mark.parametrize("kind", [OWN_THREAD, DIRECT])
async def test_a_message_addressed_to_someone_else_is_left_alone_in_a_thread(
    manager: ConversationManager, decider: ResponseDecider, kind: str
) -> None:
    """The gates still hold in Parley's thread: a message mentioning another member or another bot's is not answered."""
    conversation = manager.start(CHANNEL, [], kind=kind)
    to_bob = await decider.decide(msg(ALICE, "<@11> can you check?", mentions=frozenset({BOB})), conversation, BOT)
    from_bot = await decider.decide(msg(OTHER_BOT, "beep", is_bot=True), conversation, BOT)
    assert (to_bob.respond, to_bob.reason) == (False, "addressed_to_other")
    assert (from_bot.respond, from_bot.reason) == (False, "other_bot")


def test_a_thread_conversation_survives_a_snapshot_and_a_late_adoption(clock: Clock) -> None:
    """Kept and restored after hours, a thread's conversation is adopted with its kind; a channel's is refused."""
    kept = ConversationManager(60, clock=clock)
    thread = kept.start(CHANNEL, [msg(at=clock.now)], kind=OWN_THREAD)
    channel = kept.start(CHANNEL + 1, [msg(at=clock.now, channel_id=CHANNEL + 1)])
    clock.advance(7200)
    later = ConversationManager(60, clock=clock)
    assert later.adopt(restore(snapshot(thread)))
    assert not later.adopt(restore(snapshot(channel)))
    resumed = later.get(CHANNEL)
    assert resumed is not None and resumed.kind == OWN_THREAD
