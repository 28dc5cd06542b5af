"""The learned follow-up tier: features of a message the follow-up rules turned down, and the model scoring them.

Nothing here knows about Discord: the features read only the engine's conversation (`ConversationIndexes`) and the
clock, so the bot, `eval/replay.py` and `eval/train_decider.py` compute exactly the same numbers. The model is
a few dozen shallow gradient-boosted trees (`eval/train_decider.py` fits them on the irc-train transcripts
and picks the thresholds on irc-dev), stored as a small JSON file and scored in plain Python by
walking each tree. A lexicon of weighted words (a logistic regression fitted on what the trees leave
unexplained) adds the message's words to the trees' log-odds: a dict lookup per word.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Reversible, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from records import MessageRecord

HERE = Path(__file__).resolve().parents[1]
#: The model the bot ships with; the `DECIDER_MODEL` setting names another.
SHIPPED_MODEL = HERE / "decider_model.json"
MODEL_FORMAT = "parley-followup-trees/2"
# Bounds on what a model file may hold, so a corrupt one fails loading instead of the hot path.
MAX_TREES = 1000
MAX_DEPTH = 8
MAX_LEXICON_TERMS = 10_000

#: The follow-up rules' decisions the tier may overrule, "yes" ones included: each one means the bot has spoken.
CANDIDATE_REASONS: tuple[str, ...] = (
    "followup",
    "followup_implicit",
    "outside_window",
    "already_followed_up",
    "cut_in",
    "not_for_bot",
)

FEATURES: tuple[str, ...] = (
    # Which follow-up rule decided the message.
    "rule_followup",
    "rule_followup_implicit",
    "rule_outside_window",
    "rule_already_followed_up",
    "rule_cut_in",
    "rule_not_for_bot",
    # The bot's latest turn: how long ago, whom it named, whether it asked something.
    "log_seconds_since_bot",
    "bot_named_author",
    "bot_named_nobody",
    "bot_asked",
    "bot_ever_named_author",
    "log_seconds_since_bot_named_author",
    # The message itself.
    "question",
    "log_words",
    "thanks",
    "opener",
    # What happened since the bot's latest turn, and the author's own recent thread.
    "author_messages_since_bot",
    "first_since_bot",
    "log_others_messages_since_bot",
    "someone_addressed_author",
    "previous_is_bot",
    "log_seconds_since_author",
    "author_addressed_bot",
    # Word overlap with what the bot said last.
    "overlap_bot",
    # Who the author is talking with: the bot's recent turns to them, others' words to them, theirs to others.
    "bot_latest_named_is_author",
    "bot_turns_naming_author",
    "bot_answered_author_unnamed",
    "others_named_author",
    "author_named_others",
    "latest_to_name_author_is_bot",
    "author_previous_addressed_bot",
    "log_messages_since_author",
    # The people's habits: how much the bot and the author speak, how often they name whom they answer.
    "bot_turns_recent",
    "bot_named_share",
    "author_messages_recent",
    "others_named_share",
    "log_seconds_since_previous",
    # The message's form.
    "question_word",
    "second_person",
    "first_person",
    # The conversation beyond the look-back: how many bot turns named the author since it began.
    "bot_turns_naming_author_all",
    # The message's words, weighed by the model's lexicon: added to the trees' log-odds as they are, never split on
    # (the trees are fitted first and the lexicon on what they leave unexplained).
    "lexical",
)
LEXICAL = FEATURES.index("lexical")

# A feature that cannot be measured (no earlier message of the author in the look-back) takes
# this many seconds: longer than any follow-up window, so it reads as "long ago".
_LONG_AGO_SECONDS = 3600.0
_LOG_LONG_AGO = math.log1p(_LONG_AGO_SECONDS)
_WORD = re.compile(r"[a-z0-9_']+")
_THANKS = frozenset("thanks thank thx ty tnx thanx cheers".split())
_QUESTION_WORDS = frozenset("how what why where when which who is are can could does do did should would will".split())
_SECOND_PERSON = frozenset("you your you're youre u ur yours".split())
_FIRST_PERSON = frozenset("i my i'm im me mine i've ive".split())
_OPENERS = frozenset(
    "yes yeah yep yup no nope nah ok okay k sure right but and so well hmm still same done it that".split()
)
# Words too common to say two messages are about the same thing.
_STOPWORDS = frozenset(
    "the a an to is it i you of and or in on for that this do does be are was with my me your have has can just"
    " not no yes if so but what how why it's i'm at as".split()
)


@dataclass(frozen=True, slots=True)
class Lexicon:
    """Log-odds per term of a message (`lexical_terms`), and their base: a logistic regression's weights."""

    bias: float
    weights: Mapping[str, float]
    # Derived: each word's own weight (0.0 if it has none) and its weights marked with a rule, by rule.
    _by_word: Mapping[str, tuple[float, Mapping[str, float]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plain: dict[str, float] = {}
        marked: dict[str, dict[str, float]] = {}
        for term, weight in self.weights.items():
            reason, bar, word = term.partition("|")
            if bar:
                marked.setdefault(word, {})[reason] = weight
            else:
                plain[term] = weight
        by_word = {word: (plain.get(word, 0.0), marked.get(word, {})) for word in plain.keys() | marked.keys()}
        object.__setattr__(self, "_by_word", by_word)

    def logit(self, terms: Iterable[str]) -> float:
        """The lexicon's log-odds for a message's terms: the bias plus each known term's weight."""
        weight = self.weights.get
        return self.bias + sum(weight(term, 0.0) for term in terms)

    def message_logit(self, tokens: Iterable[str], reason: str) -> float:
        """`logit(lexical_terms(tokens, reason))` to the last bit, as the bot scores a message.

        One lookup per word instead of two, and no marked terms built: a scored message's lookups are the lexicon's
        cost, most of them missing the processor's caches (the table is large and read rarely). The weights are
        added in the same order, the marked ones after all the plain ones, so the sum rounds the same; a term the
        lexicon lacks added 0.0 there, which leaves a sum of finite weights unchanged.
        """
        total = 0.0
        marked: list[float] = []
        entry = self._by_word.get
        for token in tokens:
            found = entry(token)
            if found is not None:
                total += found[0]
                weight = found[1].get(reason)
                if weight is not None:
                    marked.append(weight)
        for weight in marked:
            total += weight
        return self.bias + total

    def to_json(self) -> dict[str, Any]:
        return {"bias": self.bias, "weights": dict(sorted(self.weights.items()))}


#: A lexicon that adds nothing: the trees' log-odds alone.
NO_LEXICON = Lexicon(0.0, {})


class ModelFileError(Exception):
    """A learned-tier model file that cannot be used; the message is one line naming the file."""


def _tokens(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def _first_word(text: str) -> str:
    parts = text.split(None, 1)
    return parts[0].lower().strip(",.!:;") if parts else ""


def lexical_terms(tokens: frozenset[str], reason: str) -> list[str]:
    """What the lexicon weighs in a message: its words, and each word marked with the rule that decided it.

    The same word means different things after different rules ("ok" right after the bot's answer, or as
    an author's third line), so the lexicon may weigh the two apart.
    """
    return [*tokens, *(f"{reason}|{token}" for token in tokens)]


def message_terms(text: str, reason: str) -> list[str]:
    """`lexical_terms` of a message's text (for training, which has the text but not `features`' tokens)."""
    return lexical_terms(_tokens(text), reason)


def _words(text: str) -> frozenset[str]:
    # Not cached: a scored message reads two texts (its own and the bot's last), and a cache of texts kept the
    # allocator's arenas of every message around them from being returned (+120 MiB resident after 200,000
    # messages in bench_engine, for 50% hits on 1,450 calls).
    return _tokens(text) - _STOPWORDS


def _overlap(words: frozenset[str], other: set[str] | frozenset[str]) -> float:
    return len(words & other) / len(words) if words else 0.0


def _log_seconds(later: datetime, earlier: datetime) -> float:
    seconds = (later - earlier).total_seconds()
    return math.log1p(min(max(seconds, 0.0), _LONG_AGO_SECONDS))


class ConversationIndexes(Protocol):
    """What the features read of a live conversation (`conversation.ChannelConversation`): its messages and the
    indexes of the bot's turns. Stated here, so this tier sits below the engine instead of importing it back."""

    @property
    def messages(self) -> Reversible[MessageRecord]: ...

    @property
    def last_message_by_author(self) -> Mapping[int, MessageRecord]: ...

    @property
    def bot_message_naming(self) -> Mapping[int, MessageRecord]: ...

    @property
    def bot_namings(self) -> Mapping[int, int]: ...


def features(
    message: MessageRecord,
    conversation: ConversationIndexes,
    bot_user_id: int,
    now: datetime,
    reason: str,
    look_back: int = 20,
    lexicon: Lexicon = NO_LEXICON,
) -> list[float]:
    """The values of `FEATURES` for a message the follow-up rule `reason` decided after the bot spoke.

    One walk back over at most `look_back` messages (the message itself skipped), like the rules' own;
    the rest comes from the conversation's indexes, and `lexical` from `lexicon`.
    """
    # One long function on purpose: it computes the feature vector in the order of `FEATURES`, so it reads
    # top to bottom against that list and against training's replay; and the engine runs it for every
    # scored message, where the values one walk finds are shared by several features.
    author = message.author_id
    message_id = message.message_id
    last_bot = conversation.last_message_by_author[bot_user_id]
    named_author = conversation.bot_message_naming.get(author)
    text = message.content
    tokens = _tokens(text)
    words = tokens - _STOPWORDS  # `_words(text)`, from the tokens already found
    first_word = _first_word(text)

    # Counted over the whole look-back; the "since the bot" counts are these at the bot's latest turn.
    since_bot = True
    author_since_bot = others_since_bot = 0
    someone_addressed_author = author_addressed_bot = bot_answered_author_unnamed = False
    bot_latest_named: bool | None = None  # whether the bot's latest turn naming anyone named the author
    latest_to_name_author_is_bot: bool | None = None
    bot_turns = bot_turns_naming = bot_turns_naming_author = 0
    author_messages = author_named_others = 0
    others_messages = others_naming = others_named_author = 0
    messages_since_author = look_back
    previous: MessageRecord | None = None
    author_previous: MessageRecord | None = None
    newer: MessageRecord | None = None  # the message just after `earlier` in time
    budget = look_back
    for earlier in reversed(conversation.messages):
        if earlier.message_id == message_id:
            continue
        budget -= 1
        if budget < 0:
            break
        if previous is None:
            previous = earlier
        earlier_author = earlier.author_id
        if earlier_author == bot_user_id:
            if since_bot:
                since_bot = False
                author_since_bot, others_since_bot = author_messages, others_messages
            bot_turns += 1
            if earlier.mention_ids or earlier.reply_to_author_id is not None:
                bot_turns_naming += 1
                names_author = author in earlier.mention_ids or earlier.reply_to_author_id == author
                if bot_latest_named is None:
                    bot_latest_named = names_author
                if names_author:
                    bot_turns_naming_author += 1
                    if latest_to_name_author_is_bot is None:
                        latest_to_name_author_is_bot = True
        elif earlier_author == author:
            author_messages += 1
            if author_previous is None:
                author_previous = earlier
                messages_since_author = others_messages
                bot_answered_author_unnamed = (
                    newer is not None
                    and newer.author_id == bot_user_id
                    and not newer.mention_ids
                    and newer.reply_to_author_id is None
                )
            if earlier.mention_ids or earlier.reply_to_author_id is not None:
                if bot_user_id in earlier.mention_ids or earlier.reply_to_author_id == bot_user_id:
                    author_addressed_bot = True
                if _names_other(earlier, author, bot_user_id):
                    author_named_others += 1
        else:
            others_messages += 1
            if earlier.mention_ids or earlier.reply_to_author_id is not None:
                others_naming += 1
                if author in earlier.mention_ids or earlier.reply_to_author_id == author:
                    others_named_author += 1
                    if latest_to_name_author_is_bot is None:
                        latest_to_name_author_is_bot = False
                    someone_addressed_author |= since_bot
        newer = earlier
    if since_bot:
        author_since_bot, others_since_bot = author_messages, others_messages

    last_bot_names = last_bot.mention_ids
    bot_named = author in last_bot_names or last_bot.reply_to_author_id == author
    # Flags stay bools (a tree compares them like 0 and 1): a float() each would cost more than the walk's steps.
    return [
        reason == "followup",
        reason == "followup_implicit",
        reason == "outside_window",
        reason == "already_followed_up",
        reason == "cut_in",
        reason == "not_for_bot",
        _log_seconds(now, last_bot.timestamp),
        bot_named,
        not last_bot_names and last_bot.reply_to_author_id is None,
        "?" in last_bot.content,
        named_author is not None,
        _log_seconds(now, named_author.timestamp) if named_author is not None else _LOG_LONG_AGO,
        "?" in text,
        math.log1p(len(text.split())),
        not words.isdisjoint(_THANKS),
        first_word in _OPENERS,
        min(author_since_bot, 5),
        author_since_bot == 0,
        math.log1p(others_since_bot),
        someone_addressed_author,
        previous is not None and previous.author_id == bot_user_id,
        _log_seconds(now, author_previous.timestamp) if author_previous is not None else _LOG_LONG_AGO,
        author_addressed_bot,
        _overlap(words, _words(last_bot.content)),
        bool(bot_latest_named),
        min(bot_turns_naming_author, 3),
        bot_answered_author_unnamed,
        min(others_named_author, 3),
        min(author_named_others, 3),
        bool(latest_to_name_author_is_bot),
        author_previous is not None
        and (bot_user_id in author_previous.mention_ids or author_previous.reply_to_author_id == bot_user_id),
        math.log1p(messages_since_author),
        min(bot_turns, 5),
        bot_turns_naming / bot_turns if bot_turns else 0.0,
        min(author_messages, 5),
        others_naming / others_messages if others_messages else 0.0,
        _log_seconds(now, previous.timestamp) if previous is not None else _LOG_LONG_AGO,
        first_word in _QUESTION_WORDS,
        not tokens.isdisjoint(_SECOND_PERSON),
        not tokens.isdisjoint(_FIRST_PERSON),
        # A restored conversation may lack the counts: a bot turn naming the author still counts as one.
        min(max(conversation.bot_namings.get(author, 0), named_author is not None), 10),
        lexicon.message_logit(tokens, reason),
    ]


def _names_other(message: MessageRecord, author: int, bot_user_id: int) -> bool:
    reply_to = message.reply_to_author_id
    if reply_to is not None and reply_to != author and reply_to != bot_user_id:
        return True
    return any(person != author and person != bot_user_id for person in message.mention_ids)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Scores at or above which the tier answers, by channel mode (`mention-only` never reaches the tier)."""

    normal: float
    chatty: float


# A tree as the hot path walks it: a leaf is its log-odds; a split is (feature index, threshold, left, right),
# a value at or below the threshold going left.
Tree = float | tuple[int, float, "Tree", "Tree"]


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a tree as the file states it: a leaf (`feature` None) or a split, with its log-odds either way."""

    value: float  # the tree's output if the walk stopped here: what explains a split's effect
    feature: int | None = None
    threshold: float = 0.0
    left: Node | None = None
    right: Node | None = None

    def compiled(self) -> Tree:
        if self.feature is None or self.left is None or self.right is None:
            return self.value
        return (self.feature, self.threshold, self.left.compiled(), self.right.compiled())

    def to_json(self) -> dict[str, Any]:
        if self.feature is None or self.left is None or self.right is None:
            return {"value": self.value}
        return {
            "feature": FEATURES[self.feature],
            "threshold": self.threshold,
            "value": self.value,
            "left": self.left.to_json(),
            "right": self.right.to_json(),
        }


@dataclass(frozen=True, slots=True)
class LearnedModel:
    """Trees over `FEATURES` and a lexicon (their log-odds add up), the thresholds and the judge's band."""

    names: tuple[str, ...]
    base: float  # log-odds before any tree
    trees: tuple[Node, ...]
    thresholds: Thresholds  # probabilities
    # With a judge configured, a score within this many log-odds of the mode's threshold is the judge's to decide.
    band_logits: float
    # Read by `features` (its `lexical` value), which the model adds to the trees' sum.
    lexicon: Lexicon = NO_LEXICON
    # Derived: the thresholds as log-odds, and the trees as nested tuples for the hot path.
    logits: Thresholds = field(init=False)
    _compiled: tuple[Tree, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "logits", Thresholds(logit(self.thresholds.normal), logit(self.thresholds.chatty)))
        object.__setattr__(self, "_compiled", tuple(tree.compiled() for tree in self.trees))

    def logit(self, values: Sequence[float]) -> float:
        """The model's log-odds that the message is for the bot."""
        total = self.base + values[LEXICAL]
        for node in self._compiled:
            while type(node) is tuple:
                feature, threshold, left, right = node
                node = left if values[feature] <= threshold else right
            total += node  # type: ignore[operator]  # a leaf: the loop stops at the first non-tuple
        return total

    def score(self, values: Sequence[float]) -> float:
        """The probability (0 to 1) the model gives that the message is for the bot."""
        return sigmoid(self.logit(values))

    def top_features(self, values: Sequence[float], count: int = 3) -> list[tuple[str, float]]:
        """The features that moved this score most, with their log-odds: each split's change, summed per feature."""
        lexical = values[LEXICAL]
        moved: dict[int, float] = {LEXICAL: lexical} if lexical else {}
        for node in self.trees:
            while node.feature is not None and node.left is not None and node.right is not None:
                child = node.left if values[node.feature] <= node.threshold else node.right
                moved[node.feature] = moved.get(node.feature, 0.0) + child.value - node.value
                node = child
        ranked = sorted(moved.items(), key=lambda item: (-abs(item[1]), item[0]))
        return [(self.names[index], value) for index, value in ranked[:count]]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": MODEL_FORMAT,
            "features": list(self.names),
            "thresholds": {"normal": self.thresholds.normal, "chatty": self.thresholds.chatty},
            "judge_band_logits": self.band_logits,
            "base": self.base,
            "trees": [tree.to_json() for tree in self.trees],
            "lexicon": self.lexicon.to_json(),
        }


def sigmoid(log_odds: float) -> float:
    """Log-odds as a probability."""
    if log_odds >= 0:
        return 1 / (1 + math.exp(-log_odds))
    odds = math.exp(log_odds)
    return odds / (1 + odds)


def logit(probability: float) -> float:
    """A probability as log-odds; 0 and 1 become the most extreme finite values."""
    probability = min(max(probability, 1e-12), 1 - 1e-12)
    return math.log(probability / (1 - probability))


def describe_features(top: Sequence[tuple[str, float]]) -> str:
    """`top_features` as one short line for logs: `name +0.84, name -0.31`."""
    return ", ".join(f"{name} {value:+.2f}" for name, value in top)


def _finite(value: Any, what: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{what} should be a finite number")
    return float(value)


def _probability(value: Any, what: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        raise ValueError(f"{what} should be a number from 0 to 1")
    return float(value)


def _node(data: Any, where: str, depth: int) -> Node:
    if not isinstance(data, dict):
        raise ValueError(f"{where} should be an object")
    value = _finite(data.get("value"), f"{where}.value")
    if "feature" not in data:
        return Node(value)
    if depth >= MAX_DEPTH:
        raise ValueError(f"{where} is deeper than {MAX_DEPTH} levels")
    name = data["feature"]
    if name not in FEATURES:
        raise ValueError(f"{where}.feature {name!r} is not one of the features this version computes (retrain it)")
    return Node(
        value,
        FEATURES.index(name),
        _finite(data.get("threshold"), f"{where}.threshold"),
        _node(data.get("left"), f"{where}.left", depth + 1),
        _node(data.get("right"), f"{where}.right", depth + 1),
    )


def _lexicon(data: Any) -> Lexicon:
    if not isinstance(data, dict):
        raise ValueError("'lexicon' should be an object with 'bias' and 'weights'")
    weights = data.get("weights")
    if not isinstance(weights, dict) or len(weights) > MAX_LEXICON_TERMS:
        raise ValueError(f"'lexicon.weights' should be an object of at most {MAX_LEXICON_TERMS} terms")
    return Lexicon(
        _finite(data.get("bias"), "'lexicon.bias'"),
        {term: _finite(weight, f"'lexicon.weights' of {term!r}") for term, weight in weights.items()},
    )


def model_from_json(data: Any) -> LearnedModel:
    """Check and build a model from its parsed JSON; raises ValueError saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    if data.get("format") != MODEL_FORMAT:
        raise ValueError(f"'format' should be {MODEL_FORMAT!r}, not {data.get('format')!r} (retrain it)")
    if data.get("features") != list(FEATURES):
        raise ValueError("its 'features' are not the ones this version of Parley computes (retrain it)")
    trees = data.get("trees")
    if not isinstance(trees, list) or not 0 < len(trees) <= MAX_TREES:
        raise ValueError(f"'trees' should be a list of 1 to {MAX_TREES} trees")
    thresholds = data.get("thresholds")
    if not isinstance(thresholds, dict):
        raise ValueError("'thresholds' should be an object with 'normal' and 'chatty'")
    band = data.get("judge_band_logits")
    if not isinstance(band, int | float) or isinstance(band, bool) or not 0 <= band < math.inf:
        raise ValueError("'judge_band_logits' should be a number >= 0")
    return LearnedModel(
        names=FEATURES,
        base=_finite(data.get("base"), "'base'"),
        trees=tuple(_node(tree, f"trees[{index}]", 0) for index, tree in enumerate(trees)),
        thresholds=Thresholds(
            normal=_probability(thresholds.get("normal"), "'thresholds.normal'"),
            chatty=_probability(thresholds.get("chatty"), "'thresholds.chatty'"),
        ),
        band_logits=float(band),
        lexicon=_lexicon(data.get("lexicon")),
    )


def model_path(setting: str) -> Path:
    """Where the `DECIDER_MODEL` setting points: a relative path is inside Parley's folder, whatever the cwd."""
    return HERE / setting


def load_model(path: str | Path) -> LearnedModel:
    """Read a model file; raises `ModelFileError` with one line naming the file and the problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelFileError(f"learned decider model {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ModelFileError(f"learned decider model {path}: cannot read it ({error})") from None
    try:
        return model_from_json(json.loads(text))
    except json.JSONDecodeError as error:
        raise ModelFileError(f"learned decider model {path}: not JSON ({error.msg}, line {error.lineno})") from None
    except ValueError as error:
        raise ModelFileError(f"learned decider model {path}: {error}") from None
