"""The learned follow-up tier: features of a message the follow-up rules turned down, and the model scoring them.

Nothing here knows about Discord: the features read only the engine's `ChannelConversation` and the
clock, so the bot, `replay.py` and `train_decider.py` compute exactly the same numbers. The model is
a logistic regression (`train_decider.py` fits it on the irc-train transcripts and picks its
thresholds on irc-dev), stored as a small JSON file and scored in plain Python.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conversation import ChannelConversation, MessageRecord

HERE = Path(__file__).resolve().parent
#: The model the bot ships with; the `DECIDER_MODEL` setting names another.
SHIPPED_MODEL = HERE / "decider_model.json"
MODEL_FORMAT = "parley-followup-logreg/1"

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
    "named_and_first",
    "log_others_messages_since_bot",
    "speakers_since_bot",
    "someone_addressed_author",
    "previous_is_bot",
    "log_seconds_since_author",
    "author_addressed_bot",
    # Word overlap: with what the bot said last, and with what others said lately.
    "overlap_bot",
    "overlap_others",
)

# A feature that cannot be measured (no earlier message of the author in the look-back) takes
# this many seconds: longer than any follow-up window, so it reads as "long ago".
_LONG_AGO_SECONDS = 3600.0
_LOG_LONG_AGO = math.log1p(_LONG_AGO_SECONDS)
_WORD = re.compile(r"[a-z0-9_']+")
_THANKS = frozenset("thanks thank thx ty tnx thanx cheers".split())
_OPENERS = frozenset(
    "yes yeah yep yup no nope nah ok okay k sure right but and so well hmm still same done it that".split()
)
# Words too common to say two messages are about the same thing.
_STOPWORDS = frozenset(
    "the a an to is it i you of and or in on for that this do does be are was with my me your have has can just"
    " not no yes if so but what how why it's i'm at as".split()
)


class ModelFileError(Exception):
    """A learned-tier model file that cannot be used; the message is one line naming the file."""


@functools.lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    # Cached: each message is read again by the look-backs of the next 20 decided after it.
    return frozenset(word for word in _WORD.findall(text.lower()) if word not in _STOPWORDS)


def _overlap(words: frozenset[str], other: set[str] | frozenset[str]) -> float:
    return len(words & other) / len(words) if words else 0.0


def _log_seconds(later: datetime, earlier: datetime) -> float:
    seconds = (later - earlier).total_seconds()
    return math.log1p(min(max(seconds, 0.0), _LONG_AGO_SECONDS))


def features(
    message: MessageRecord,
    conversation: ChannelConversation,
    bot_user_id: int,
    now: datetime,
    reason: str,
    look_back: int = 20,
) -> list[float]:
    """The values of `FEATURES` for a message the follow-up rule `reason` decided after the bot spoke.

    One walk back over at most `look_back` messages (the message itself skipped), like the rules' own.
    """
    author = message.author_id
    last_bot = conversation.last_message_by_author[bot_user_id]
    named_author = conversation.bot_message_naming.get(author)
    text = message.content
    words = _words(text)
    first_word = text.split(None, 1)[0].lower().strip(",.!:;") if text.strip() else ""

    author_since_bot = others_since_bot = 0
    speakers: set[int] = set()
    someone_addressed_author = author_addressed_bot = False
    previous_is_bot: bool | None = None
    author_previous: MessageRecord | None = None
    others_words: set[str] = set()
    since_bot = True
    budget = look_back
    for earlier in reversed(conversation.messages):
        if earlier.message_id == message.message_id:
            continue
        budget -= 1
        if budget < 0:
            break
        earlier_author = earlier.author_id
        if previous_is_bot is None:
            previous_is_bot = earlier_author == bot_user_id
        if earlier_author == bot_user_id:
            since_bot = False
            continue
        if earlier_author == author:
            author_since_bot += since_bot
            if author_previous is None:
                author_previous = earlier
            if bot_user_id in earlier.mention_ids or earlier.reply_to_author_id == bot_user_id:
                author_addressed_bot = True
            continue
        others_words |= _words(earlier.content)
        if since_bot:
            others_since_bot += 1
            speakers.add(earlier_author)
            if author in earlier.mention_ids or earlier.reply_to_author_id == author:
                someone_addressed_author = True

    bot_named = author in last_bot.mention_ids or last_bot.reply_to_author_id == author
    first = author_since_bot == 0
    return [
        float(reason == "followup"),
        float(reason == "followup_implicit"),
        float(reason == "outside_window"),
        float(reason == "already_followed_up"),
        float(reason == "cut_in"),
        float(reason == "not_for_bot"),
        _log_seconds(now, last_bot.timestamp),
        float(bot_named),
        float(not last_bot.mention_ids and last_bot.reply_to_author_id is None),
        float("?" in last_bot.content),
        float(named_author is not None),
        _log_seconds(now, named_author.timestamp) if named_author is not None else _LOG_LONG_AGO,
        float("?" in text),
        math.log1p(len(text.split())),
        float(not words.isdisjoint(_THANKS)),
        float(first_word in _OPENERS),
        float(min(author_since_bot, 5)),
        float(first),
        float(first and bot_named),
        math.log1p(others_since_bot),
        float(min(len(speakers), 5)),
        float(someone_addressed_author),
        float(bool(previous_is_bot)),
        _log_seconds(now, author_previous.timestamp) if author_previous is not None else _LOG_LONG_AGO,
        float(author_addressed_bot),
        _overlap(words, _words(last_bot.content)),
        _overlap(words, others_words),
    ]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Scores at or above which the tier answers, by channel mode (`mention-only` never reaches the tier)."""

    normal: float
    chatty: float


@dataclass(frozen=True, slots=True)
class LearnedModel:
    """A logistic regression over standardised `FEATURES`, its thresholds and the judge's uncertain band."""

    names: tuple[str, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    weights: tuple[float, ...]  # per standardised feature, so their sizes compare
    bias: float
    thresholds: Thresholds  # probabilities
    # With a judge configured, a score within this many log-odds of the mode's threshold is the judge's to decide.
    band_logits: float
    # Derived: the thresholds as log-odds, and the weights folded over the standardisation for the hot path.
    logits: Thresholds = field(init=False)
    _raw_weights: tuple[float, ...] = field(init=False, repr=False)
    _raw_bias: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "logits", Thresholds(logit(self.thresholds.normal), logit(self.thresholds.chatty)))
        raw = tuple(weight / scale for weight, scale in zip(self.weights, self.scales, strict=True))
        object.__setattr__(self, "_raw_weights", raw)
        object.__setattr__(self, "_raw_bias", self.bias - sum(w * m for w, m in zip(raw, self.means, strict=True)))

    def logit(self, values: Sequence[float]) -> float:
        """The model's log-odds that the message is for the bot."""
        total = self._raw_bias
        for value, weight in zip(values, self._raw_weights, strict=True):
            total += weight * value
        return total

    def score(self, values: Sequence[float]) -> float:
        """The probability (0 to 1) the model gives that the message is for the bot."""
        return sigmoid(self.logit(values))

    def top_features(self, values: Sequence[float], count: int = 3) -> list[tuple[str, float]]:
        """The features that moved this score most from the average candidate's, with their log-odds."""
        contributions = [
            (name, weight * (value - mean) / scale)
            for name, value, mean, scale, weight in zip(
                self.names, values, self.means, self.scales, self.weights, strict=True
            )
        ]
        contributions.sort(key=lambda item: -abs(item[1]))
        return contributions[:count]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": MODEL_FORMAT,
            "features": list(self.names),
            "means": list(self.means),
            "scales": list(self.scales),
            "weights": list(self.weights),
            "bias": self.bias,
            "thresholds": {"normal": self.thresholds.normal, "chatty": self.thresholds.chatty},
            "judge_band_logits": self.band_logits,
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


def _numbers(data: dict[str, Any], key: str, length: int) -> tuple[float, ...]:
    values = data.get(key)
    if (
        not isinstance(values, list)
        or len(values) != length
        or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values)
    ):
        raise ValueError(f"{key!r} should be a list of {length} finite numbers")
    return tuple(float(v) for v in values)


def _probability(value: Any, what: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        raise ValueError(f"{what} should be a number from 0 to 1")
    return float(value)


def model_from_json(data: Any) -> LearnedModel:
    """Check and build a model from its parsed JSON; raises ValueError saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    if data.get("format") != MODEL_FORMAT:
        raise ValueError(f"'format' should be {MODEL_FORMAT!r}, not {data.get('format')!r}")
    if data.get("features") != list(FEATURES):
        raise ValueError("its 'features' are not the ones this version of Parley computes (retrain it)")
    count = len(FEATURES)
    scales = _numbers(data, "scales", count)
    if any(scale <= 0 for scale in scales):
        raise ValueError("'scales' should all be positive")
    bias = data.get("bias")
    if not isinstance(bias, int | float) or isinstance(bias, bool) or not math.isfinite(bias):
        raise ValueError("'bias' should be a finite number")
    thresholds = data.get("thresholds")
    if not isinstance(thresholds, dict):
        raise ValueError("'thresholds' should be an object with 'normal' and 'chatty'")
    band = data.get("judge_band_logits")
    if not isinstance(band, int | float) or isinstance(band, bool) or not 0 <= band < math.inf:
        raise ValueError("'judge_band_logits' should be a number >= 0")
    return LearnedModel(
        names=FEATURES,
        means=_numbers(data, "means", count),
        scales=scales,
        weights=_numbers(data, "weights", count),
        bias=float(bias),
        thresholds=Thresholds(
            normal=_probability(thresholds.get("normal"), "'thresholds.normal'"),
            chatty=_probability(thresholds.get("chatty"), "'thresholds.chatty'"),
        ),
        band_logits=float(band),
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
