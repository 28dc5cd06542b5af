"""Whether Parley answers a message: the decider's tiers (gates, explicit asks, follow-ups, the learned tier and
the LLM judge), each decision logged with its reason.

Nothing here knows about Discord; the conversation it reads is the engine's (deciding/channel_conversation.py), and time
comes from the same injected clock. conversation.py, the engine, offers `ResponseDecider` with its conversations.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from deciding.channel_conversation import ChannelConversation, Clock, utc_now
from deciding.followup import CANDIDATE_REASONS, LearnedModel, describe_features, features, sigmoid
from limits import TokenBucket
from records import CHANNEL, CHATTY, DIRECT, MENTION_ONLY, NORMAL, OWN_THREAD, Decision, MessageRecord

decision_log = logging.getLogger("parley.decisions")


# --- Deciding ---------------------------------------------------------------------------------


JudgeVerdict = tuple[bool, str] | tuple[bool, str, float]
Judge = Callable[[MessageRecord, ChannelConversation], Awaitable[JudgeVerdict]]
# The judge's decision on a message the tiers before it left open, logged once it is made: await it.
JudgeCall = Coroutine[Any, Any, Decision]
DecisionListener = Callable[[MessageRecord, Decision], None]
# Sees the features of every message the learned tier scores (eval/train_decider.py collects them so).
FeatureListener = Callable[[MessageRecord, list[float]], None]


class DecisionPolicy(Protocol):
    """What the bot and the replay tool need from a decider; `ResponseDecider` is the default."""

    def should_start_conversation(self, message: MessageRecord, bot_user_id: int) -> tuple[bool, str]: ...

    async def should_respond(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int
    ) -> tuple[bool, str]: ...

    def decide_now(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int
    ) -> Decision | JudgeCall:
        """The bot's path: the decision, or the call to await when it needs one (`ResponseDecider.decide_now`)."""
        ...


# Decisions that carry nothing message-specific are built once, so deciding allocates none.
_MENTION = Decision(True, "mention", "explicit")
_REPLY_TO_BOT = Decision(True, "reply_to_bot", "explicit")
_CALLED_BY_NAME = Decision(True, "called_by_name", "explicit")
_NO_CONVERSATION = Decision(False, "no_conversation", "start")
_NO_CONVERSATION_ANSWER = (False, _NO_CONVERSATION.reason)
_OTHER_BOT = Decision(False, "other_bot", "gate")
_REPLY_TO_OTHER = Decision(False, "reply_to_other", "gate")
_ADDRESSED_TO_OTHER = Decision(False, "addressed_to_other", "gate")
_NO_TEXT = Decision(False, "no_text", "gate")
_FOLLOWUP = Decision(True, "followup", "followup")
_FOLLOWUP_IMPLICIT = Decision(True, "followup_implicit", "followup")
_BOT_SILENT = Decision(False, "bot_silent", "followup")
_OUTSIDE_WINDOW = Decision(False, "outside_window", "followup")
_ALREADY_FOLLOWED_UP = Decision(False, "already_followed_up", "followup")
_CUT_IN = Decision(False, "cut_in", "followup")
_NOT_FOR_BOT = Decision(False, "not_for_bot", "followup")
# The same verdict, reached without the walk back: no recent bot turn can have been answering the author.
_BYSTANDER = Decision(False, "not_for_bot", "followup")
_MENTION_ONLY = Decision(False, "mention_only", "mode")
_JUDGE_BUDGET = Decision(False, "judge_budget", "judge")
# Past the gates, every message of a thread Parley opened or of a direct message is for it.
_IN_OWN_THREAD = Decision(True, "own_thread", "place")
_DIRECT_MESSAGE = Decision(True, "direct_message", "place")
_BY_KIND = {OWN_THREAD: _IN_OWN_THREAD, DIRECT: _DIRECT_MESSAGE}


class ResponseDecider:
    """Decides in tiers whether Parley answers a message; every decision is logged with its reason.

    1. explicit: a mention of the bot (`mention`) or a reply to it (`reply_to_bot`) is always
       answered, and so is a message calling it by name (`called_by_name`, addressing.py) outside
       mention-only channels;
    2. gates: a message from another bot (`other_bot`), replying to someone else
       (`reply_to_other`), mentioning someone else (`addressed_to_other`) or without text or
       attachments (`no_text`) is left alone;
    3. follow-up: a message answering the bot's latest turn addressed to its author is answered.
       Looking back over at most `followup_scan_messages` messages for that turn:
       - `followup`: the turn mentioned or replied to the author;
       - `followup_implicit`: the turn named nobody, and the latest message addressing the bot
         before it was the author's: it answered them without naming them;
       as long as the turn is inside the follow-up window (else `outside_window`), this is the
       author's first message since it (else `already_followed_up`: they have answered it
       already), and nobody else has addressed the author since (else `cut_in`: someone else
       took up the thread). Without such a turn the message is `not_for_bot`; if the bot has not
       spoken (`bot_silent`) or not inside the window (`outside_window`), nothing is a follow-up;
    4. learned: with a model (`learned`, deciding/followup.py), every follow-up "no" after the bot spoke and every
       `followup_implicit` (with `learned_veto`, every "yes"), except a bystander no recent bot turn can have been
       answering, is scored;
       at or above the mode's threshold it is answered (`learned_yes`, else `learned_no`), and a
       score within the model's band of the threshold goes to the judge when there is one;
       without a model: a judge configured, a message the follow-up tier turned down although the bot
       spoke inside the window goes to the LLM judge, at most `judge_calls_per_minute` times a
       minute per channel (in bursts of as many); past that the answer is no (`judge_budget`);
    5. otherwise no answer.

    Tiers 3 and 4 (and the mode) apply only to a conversation of kind CHANNEL: in a thread Parley opened
    (`own_thread`) or a direct message (`direct_message`), a message past the gates is for Parley.

    Each channel's mode (`modes`, by channel id; normal when absent) adjusts tiers 3 and 4:
    `mention-only` answers nothing past the gates (`mention_only`), `chatty` doubles the follow-up
    window (`CHATTY_WINDOW_FACTOR`) and, with a judge, also asks it before the bot has spoken.

    Every rule except the judge can be switched off by its reason (`disabled_rules`, see `RULES`)
    to measure what it contributes (`eval/replay.py --ablation`).
    """

    #: The rules `disabled_rules` can switch off, named by the reason they give.
    RULES: tuple[str, ...] = (
        "mention",
        "reply_to_bot",
        "called_by_name",
        "other_bot",
        "reply_to_other",
        "addressed_to_other",
        "no_text",
        "followup",
        "followup_implicit",
        "outside_window",
        "already_followed_up",
        "cut_in",
        "learned",
    )

    #: How much longer than normal a chatty channel's follow-up window is.
    CHATTY_WINDOW_FACTOR = 2

    def __init__(
        self,
        followup_window_seconds: float = 120,
        judge: Judge | None = None,
        *,
        judge_timeout_seconds: float = 5,
        clock: Clock = utc_now,
        on_decision: DecisionListener | None = None,
        followup_scan_messages: int = 20,
        disabled_rules: Iterable[str] = frozenset(),
        modes: Mapping[int, str] | None = None,
        judge_calls_per_minute: int = 0,
        learned: LearnedModel | None = None,
        learned_veto: bool = False,
    ) -> None:
        self.followup_window = timedelta(seconds=followup_window_seconds)
        self.chatty_window = self.followup_window * self.CHATTY_WINDOW_FACTOR
        # Read, never copied: whoever owns the mapping changes a channel's mode from its next message.
        self.modes: Mapping[int, str] = {} if modes is None else modes
        self.judge = judge
        self.judge_timeout = judge_timeout_seconds
        self.clock = clock
        self.on_decision = on_decision
        self.judge_calls = 0
        # A chatty channel can put most of its messages to the judge; each is a model call. 0: unbounded.
        self.judge_budget = (
            TokenBucket(judge_calls_per_minute * 60, judge_calls_per_minute, clock=clock)
            if judge_calls_per_minute
            else None
        )
        self.followup_scan_messages = followup_scan_messages
        self.disabled_rules = frozenset(disabled_rules)
        unknown = self.disabled_rules - set(self.RULES)
        if unknown:
            raise ValueError(f"unknown decider rules {sorted(unknown)}; known: {', '.join(self.RULES)}")
        # One attribute per rule, so the hot path tests a flag instead of hashing a name.
        enabled = {rule: rule not in self.disabled_rules for rule in self.RULES}
        self._mention = enabled["mention"]
        self._reply_to_bot = enabled["reply_to_bot"]
        self._by_name = enabled["called_by_name"]
        self._other_bot = enabled["other_bot"]
        self._reply_to_other = enabled["reply_to_other"]
        self._addressed_to_other = enabled["addressed_to_other"]
        self._no_text = enabled["no_text"]
        self._followup_rule = enabled["followup"]
        self._implicit_rule = enabled["followup_implicit"]
        self._window_rule = enabled["outside_window"]
        self._first_message_rule = enabled["already_followed_up"]
        self._cut_in_rule = enabled["cut_in"]
        self.learned = learned if enabled["learned"] else None
        # Off by default: weighing every follow-up "yes" too gains F1 0.0015 on irc-dev and costs a third of the
        # engine's throughput (an answered member's next message is a follow-up, so busy channels score most).
        self._learned_veto = self.learned is not None and learned_veto
        self.on_features: FeatureListener | None = None
        # Scores in the judge's uncertain band, judge or not: what a judge would cost (eval/replay.py reports it).
        self.uncertain = 0
        # The follow-up rule's decision left to the tiers after the rules; read right after `_rules`.
        self._turned_down: Decision = _NOT_FOR_BOT

    def should_start_conversation(self, message: MessageRecord, bot_user_id: int) -> tuple[bool, str]:
        """An @mention of the bot, a reply to it or a message calling it by name starts a conversation.

        Only a "no" is logged here: a "yes" is followed by `should_respond` on the same message,
        whose decision is the one that says whether it was answered.
        """
        # Asked of every message of a quiet channel: one naming nobody and replying to nobody skips the call.
        if message.mention_ids or message.reply_to_author_id is not None or message.called_by_name:
            decision = self._explicit(message, bot_user_id)
            if decision is not None:
                return decision.respond, decision.reason
        # Silence without a conversation is the common case in a busy server: debug, not info. `_log`, inlined, and
        # the answer built once: a third of a busy server's messages end here.
        if self.on_decision is not None:
            self.on_decision(message, _NO_CONVERSATION)
        if decision_log.isEnabledFor(logging.DEBUG):
            _log_decision(logging.DEBUG, message, _NO_CONVERSATION)
        return _NO_CONVERSATION_ANSWER

    async def should_respond(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int
    ) -> tuple[bool, str]:
        """Whether to answer a message of a live conversation, and why."""
        decision = await self.decide(message, conversation, bot_user_id)
        return decision.respond, decision.reason

    async def decide(self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int) -> Decision:
        """`should_respond` with the tier and the judge's confidence kept."""
        decision = self.decide_now(message, conversation, bot_user_id)
        return decision if isinstance(decision, Decision) else await decision

    def decide_now(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int
    ) -> Decision | JudgeCall:
        """`decide` without a coroutine when no judge is needed: the decision, logged; else the judge's call to await.

        Almost every message is decided by the tiers before the judge, and creating and awaiting a coroutine
        for each cost a few percent of the engine's time: only a message the judge must weigh pays for one now.
        """
        decision = self._rules(message, conversation, bot_user_id)
        if decision is None:
            if self.judge is not None:
                # Read now: `_turned_down` is the next message's once this call returns.
                return self._judged(message, conversation, self._turned_down)
            decision = self._turned_down
        # `_log`, inlined: this is every decided message's path.
        if self.on_decision is not None:
            self.on_decision(message, decision)
        if decision_log.isEnabledFor(logging.INFO):
            _log_decision(logging.INFO, message, decision)
        return decision

    def _rules(self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int) -> Decision | None:
        """The decision of the rule tiers, or None when it is the learned tier's or the judge's to make."""
        # Most messages name nobody, reply to nobody and are a person's: of the explicit triggers and the gates
        # only "no text" can apply to them, so they skip the calls for the rest.
        if message.mention_ids or message.reply_to_author_id is not None or message.is_bot or message.called_by_name:
            decision = self._explicit(message, bot_user_id) or self._gate(message, bot_user_id)
            if decision is not None:
                return decision
        elif self._no_text and (not message.content or message.content.isspace()) and not message.attachments:
            return _NO_TEXT  # `_without_text`, inlined: it is asked of nearly every message
        if conversation.kind != CHANNEL:
            return _BY_KIND[conversation.kind]
        # Looked up only past the gates: explicit triggers and gated messages never pay for it.
        # Most servers set no channel's mode: the empty mapping is not searched.
        mode = self.modes.get(message.channel_id, NORMAL) if self.modes else NORMAL
        if mode == MENTION_ONLY:
            return _MENTION_ONLY
        if mode == CHATTY:
            decision = self._chatty(message, conversation, bot_user_id)
        else:
            decision = self._followup(message, conversation, bot_user_id, self.followup_window)
        if decision is None and self.learned is not None:
            # Scored here, not in the awaited path: only a score the judge must weigh pays for a coroutine.
            return self._learned(message, conversation, bot_user_id, mode)
        return decision

    def _chatty(self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int) -> Decision | None:
        decision = self._followup(message, conversation, bot_user_id, self.chatty_window)
        # A chatty channel lets the judge weigh in even before the bot has said anything.
        return self._undecided(decision) if decision is _BOT_SILENT else decision

    def _explicit(self, message: MessageRecord, bot_user_id: int) -> Decision | None:
        if self._mention and bot_user_id in message.mention_ids:
            return _MENTION
        if self._reply_to_bot and message.reply_to_author_id == bot_user_id:
            return _REPLY_TO_BOT
        # A bot's message never calls Parley by name: the gate after this decides it.
        if (
            self._by_name
            and message.called_by_name
            and not message.is_bot
            and self.modes.get(message.channel_id, NORMAL) != MENTION_ONLY
        ):
            return _CALLED_BY_NAME
        return None

    def _gate(self, message: MessageRecord, bot_user_id: int) -> Decision | None:
        if self._other_bot and message.is_bot:
            return _OTHER_BOT
        reply_to = message.reply_to_author_id
        if self._reply_to_other and reply_to is not None and reply_to != bot_user_id:
            return _REPLY_TO_OTHER
        if (
            self._addressed_to_other
            and message.mention_ids
            and _names_someone_else(message.mention_ids, message.author_id, bot_user_id)
        ):
            return _ADDRESSED_TO_OTHER
        if self._no_text and _without_text(message):
            return _NO_TEXT
        return None

    def _followup(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int, window: timedelta
    ) -> Decision | None:
        # One function on purpose (69 lines): it runs for every message in every channel, and the walk back
        # reads the rules' flags into locals once; helpers for the walk or its steps would add a call per
        # message, or per earlier message, on the engine's hottest path (bench/bench_engine_ab.py measures it).
        last_bot_message = conversation.last_message_by_author.get(bot_user_id)
        if last_bot_message is None:
            return _BOT_SILENT
        now = self.clock()
        if self._window_rule and now - last_bot_message.timestamp > window:
            return _OUTSIDE_WINDOW
        named_turn = conversation.bot_message_naming.get(message.author_id)
        unnamed_turn = conversation.last_unnamed_bot_message if self._implicit_rule else None
        # The common "no bot turn ever named them" decided here: a call to `_read_back` costs more than the check.
        if (named_turn is None and unnamed_turn is None) or not self._read_back(named_turn, unnamed_turn, conversation):
            # No bot turn in the look-back named this person or named nobody: none of them can
            # have been answering them, so the walk back could only say no. The learned tier leaves
            # them alone too: they are most of a busy channel's messages, and its features cost a walk.
            return self._undecided(_BYSTANDER) if self.judge is not None else _BYSTANDER
        # One bounded walk back from the newest message: find the bot's latest turn addressed to
        # the author, noting whether the author has spoken or been addressed by someone else since.
        author = message.author_id
        message_id = message.message_id
        spoke = cut_in = False
        # The newest bot turn that named nobody while the author was silent: whom did it answer?
        unnamed: MessageRecord | None = None
        cut_in_rule = self._cut_in_rule
        budget = self.followup_scan_messages
        for earlier in reversed(conversation.messages):
            if earlier.message_id == message_id:
                continue  # the message itself, when it has been recorded already
            budget -= 1
            if budget < 0:
                break
            earlier_author = earlier.author_id
            if earlier_author == bot_user_id:
                if author in earlier.mention_ids or earlier.reply_to_author_id == author:
                    if not self._followup_rule:
                        break
                    if spoke:
                        return self._undecided(_ALREADY_FOLLOWED_UP)
                    if cut_in:
                        return self._undecided(_CUT_IN)
                    return self._in_window(earlier, now, _FOLLOWUP, window)
                if (
                    unnamed is None
                    and self._implicit_rule
                    and not spoke
                    and not cut_in
                    and not earlier.mention_ids
                    and earlier.reply_to_author_id is None
                ):
                    unnamed = earlier
                continue
            if unnamed is not None and (
                bot_user_id in earlier.mention_ids or earlier.reply_to_author_id == bot_user_id
            ):
                # The question the unnamed turn answered: the author's own, or someone else's.
                if earlier_author == author:
                    return self._in_window(unnamed, now, _FOLLOWUP_IMPLICIT, window)
                unnamed = None
            if earlier_author == author:
                if self._first_message_rule:
                    spoke = True
                    if unnamed is None:
                        return self._undecided(_ALREADY_FOLLOWED_UP)
            elif cut_in_rule and (author in earlier.mention_ids or earlier.reply_to_author_id == author):
                cut_in = True
                if unnamed is None:
                    return self._undecided(_CUT_IN)
        return self._undecided(_NOT_FOR_BOT)

    def _in_window(self, turn: MessageRecord, now: datetime, decision: Decision, window: timedelta) -> Decision | None:
        if self._window_rule and now - turn.timestamp > window:
            return self._undecided(_OUTSIDE_WINDOW)
        if self._learned_veto or (decision is _FOLLOWUP_IMPLICIT and self.learned is not None):
            # The learned tier weighs the rules' "yes" too: it vetoes follow-ups that look like chatter. An implicit
            # follow-up is weighed even without the veto: it is right only six times in ten, and rare enough to cost
            # nothing measurable.
            self._turned_down = decision
            return None
        return decision

    def _read_back(
        self, named: MessageRecord | None, unnamed: MessageRecord | None, conversation: ChannelConversation
    ) -> bool:
        """Whether the bot turn naming the author (`named`), or the one naming nobody (`unnamed`), is among the
        messages the look-back reads: in O(1), as most messages of a busy channel are asked this."""
        messages, count = conversation.messages, self.followup_scan_messages
        if len(messages) <= count + 1:
            return True
        # The look-back skips the message being decided, usually the newest: counting one more errs on the side of
        # looking.
        oldest_read = messages[-(count + 1)].message_id
        return (named is not None and named.message_id >= oldest_read) or (
            unnamed is not None and unnamed.message_id >= oldest_read
        )

    def _undecided(self, decision: Decision) -> Decision | None:
        """A follow-up tier "no" that the learned tier or a configured judge gets to overrule."""
        if self.judge is None and self.learned is None:
            return decision
        self._turned_down = decision
        return None

    def _learned(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int, mode: str
    ) -> Decision | None:
        """The learned tier's decision on a follow-up rule's after the bot spoke; None leaves it to the judge."""
        model = self.learned
        assert model is not None
        turned_down = self._turned_down
        if turned_down is _BYSTANDER or turned_down.reason not in CANDIDATE_REASONS:
            return None if self.judge is not None else turned_down
        values = features(
            message,
            conversation,
            bot_user_id,
            self.clock(),
            turned_down.reason,
            self.followup_scan_messages,
            model.lexicon,
        )
        if self.on_features is not None:
            self.on_features(message, values)
        logit = model.logit(values)
        threshold = model.logits.chatty if mode == CHATTY else model.logits.normal
        respond = logit >= threshold
        # Only the log line carries the features that weighed most: working them out costs more than the score.
        detail = describe_features(model.top_features(values)) if decision_log.isEnabledFor(logging.INFO) else None
        decision = Decision(
            respond, "learned_yes" if respond else "learned_no", "learned", round(sigmoid(logit), 3), detail
        )
        if abs(logit - threshold) < model.band_logits:
            self.uncertain += 1
            if self.judge is not None:
                self._turned_down = decision  # the answer if the judge's budget is spent
                return None
        return decision

    async def _judged(
        self, message: MessageRecord, conversation: ChannelConversation, turned_down: Decision
    ) -> Decision:
        """The judge's decision on what the tiers before it left open, logged; past its budget, the learned tier's."""
        decision = await self._ask_judge(message, conversation)
        if decision is _JUDGE_BUDGET and turned_down.tier == "learned":
            decision = turned_down
        self._log(message, decision)
        return decision

    async def _ask_judge(self, message: MessageRecord, conversation: ChannelConversation) -> Decision:
        assert self.judge is not None
        if self.judge_budget is not None and not self.judge_budget.take(message.channel_id).admitted:
            return _JUDGE_BUDGET
        self.judge_calls += 1
        try:
            verdict = await asyncio.wait_for(self.judge(message, conversation), self.judge_timeout)
        except TimeoutError:
            return Decision(False, "judge_timeout", "judge")
        except Exception as error:  # noqa: BLE001 - a judge is a model call: any failure means "stay silent"
            decision_log.warning("judge failed: %r", error)
            return Decision(False, "judge_error", "judge")
        respond, detail, *rest = verdict
        confidence = rest[0] if rest else None
        return Decision(respond, f"judge_{'yes' if respond else 'no'}", "judge", confidence, detail)

    def _log(self, message: MessageRecord, decision: Decision, level: int = logging.INFO) -> None:
        if self.on_decision is not None:
            self.on_decision(message, decision)
        if decision_log.isEnabledFor(level):
            _log_decision(level, message, decision)


def log_decision(message: MessageRecord, decision: Decision) -> None:
    """Log a decision made outside the decider (a limit's) exactly as the decider logs its own."""
    if decision_log.isEnabledFor(logging.INFO):
        _log_decision(logging.INFO, message, decision)


def addresses_bot(message: MessageRecord, bot_user_id: int) -> bool:
    """Whether a message @mentions the bot, replies to it or calls it by name: a request for an answer."""
    return bot_user_id in message.mention_ids or message.reply_to_author_id == bot_user_id or message.called_by_name


def _log_decision(level: int, message: MessageRecord, decision: Decision) -> None:
    decision_log.log(
        level,
        "%s message %s in channel %s by %s: %s (%s)",
        "answer" if decision.respond else "ignore",
        message.message_id,
        message.channel_id,
        message.author,
        decision.reason,
        decision.tier,
        extra={
            "channel_id": message.channel_id,
            "message_id": message.message_id,
            "author_id": message.author_id,
            "author": message.author,
            "respond": decision.respond,
            "reason": decision.reason,
            "tier": decision.tier,
            "confidence": decision.confidence,
            "detail": decision.detail,
        },
    )


def _without_text(message: MessageRecord) -> bool:
    """Whether a message has neither text nor files: nothing to answer."""
    return (not message.content or message.content.isspace()) and not message.attachments


def _names_someone_else(mention_ids: frozenset[int], author_id: int, bot_user_id: int) -> bool:
    """Whether a message mentions anyone but its author and the bot (no set is built)."""
    return any(user_id != author_id and user_id != bot_user_id for user_id in mention_ids)
