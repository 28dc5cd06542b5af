"""The learned follow-up tier: its features, its model file, the mode thresholds and the judge's band."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conversation import ChannelConversation, ConversationManager
from deciding.decider import ResponseDecider as Decider
from deciding.followup import (
    CANDIDATE_REASONS,
    FEATURES,
    SHIPPED_MODEL,
    LearnedModel,
    Lexicon,
    ModelFileError,
    _tokens,
    features,
    load_model,
    message_terms,
    model_from_json,
)
from records import CHATTY, MENTION_ONLY, NORMAL, MessageRecord

ROOT = Path(__file__).resolve().parents[2]
BOT, ALICE, BOB, CAROL = 1, 10, 20, 30
CHANNEL = 500
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def record(
    message_id: int, author: int, content: str, seconds: float, mentions: frozenset[int] = frozenset()
) -> MessageRecord:
    return MessageRecord(
        message_id=message_id,
        channel_id=CHANNEL,
        author_id=author,
        author={BOT: "parley", ALICE: "alice", BOB: "bob", CAROL: "carol"}[author],
        content=content,
        timestamp=START + timedelta(seconds=seconds),
        is_bot=author == BOT,
        mention_ids=mentions,
    )


def conversation_of(clock: Clock, *messages: MessageRecord) -> ChannelConversation:
    """A live conversation holding `messages`, the clock at the last one."""
    manager = ConversationManager(600, clock=clock)
    manager.start(CHANNEL)
    conversation = None
    for message in messages:
        clock.now = message.timestamp
        conversation = manager.record_message(CHANNEL, message)
    assert conversation is not None
    return conversation


def values_of(
    message: MessageRecord, conversation: ChannelConversation, reason: str, lexicon: Lexicon | None = None
) -> dict[str, float]:
    computed = (
        features(message, conversation, BOT, message.timestamp, reason)
        if lexicon is None
        else features(message, conversation, BOT, message.timestamp, reason, lexicon=lexicon)
    )
    return dict(zip(FEATURES, computed, strict=True))


def test_features_of_a_direct_answer_to_the_bot() -> None:
    """Alice thanking the bot right after it named her: named, first since, overlap with its words, no question."""
    clock = Clock()
    answer = record(4, ALICE, "thanks, the grub reinstall worked", 30)
    conversation = conversation_of(
        clock,
        record(1, ALICE, "@parley how do I fix grub?", 0, frozenset({BOT})),
        record(2, BOT, "alice: reinstall grub from a live disk", 10, frozenset({ALICE})),
        record(3, BOB, "anyone tried the new kernel", 20),
        answer,
    )
    values = values_of(answer, conversation, "followup")
    assert values["rule_followup"] == 1 and values["rule_not_for_bot"] == 0
    assert values["bot_named_author"] == 1 and values["bot_named_nobody"] == 0 and values["first_since_bot"] == 1
    assert values["author_messages_since_bot"] == 0
    assert values["log_seconds_since_bot"] == pytest.approx(math.log1p(20))
    assert values["log_seconds_since_author"] == pytest.approx(math.log1p(30))
    assert values["author_addressed_bot"] == 1 and values["thanks"] == 1 and values["question"] == 0
    assert values["overlap_bot"] == pytest.approx(2 / 4)  # grub, reinstall of thanks, grub, reinstall, worked
    assert values["previous_is_bot"] == 0
    assert values["log_words"] == pytest.approx(math.log1p(5))


def test_features_of_a_bystander_after_others_spoke() -> None:
    """Carol, never named, after two others spoke and one addressed her: a bystander's features."""
    clock = Clock()
    chatter = record(5, CAROL, "is the mirror down?", 50)
    conversation = conversation_of(
        clock,
        record(1, ALICE, "@parley how do I fix grub?", 0, frozenset({BOT})),
        record(2, BOT, "alice: reinstall grub", 10, frozenset({ALICE})),
        record(3, BOB, "carol: the mirror moved", 20, frozenset({CAROL})),
        record(4, ALICE, "ok trying", 30),
        chatter,
    )
    values = values_of(chatter, conversation, "not_for_bot")
    assert values["rule_not_for_bot"] == 1 and values["bot_named_author"] == 0 and values["bot_ever_named_author"] == 0
    assert values["someone_addressed_author"] == 1
    assert values["log_others_messages_since_bot"] == pytest.approx(math.log1p(2))
    assert values["question"] == 1 and values["overlap_bot"] == 0 and values["question_word"] == 1
    assert values["log_seconds_since_author"] == pytest.approx(math.log1p(3600))  # never spoke: "long ago"


def test_features_count_the_authors_messages_since_the_bot() -> None:
    """An author's third line since the bot's turn is not their first: the count and the flag say so."""
    clock = Clock()
    third = record(5, ALICE, "still nothing", 40)
    conversation = conversation_of(
        clock,
        record(1, BOT, "alice: try this", 0, frozenset({ALICE})),
        record(2, ALICE, "ok", 10),
        record(3, ALICE, "hmm", 20),
        third,
    )
    values = values_of(third, conversation, "already_followed_up")
    assert values["author_messages_since_bot"] == 2 and values["first_since_bot"] == 0
    assert values["opener"] == 1 and values["bot_named_author"] == 1


def test_features_of_whom_the_author_talks_with() -> None:
    """Who named Alice lately (the bot twice, then Bob) and whom she named (Carol) are counted over the look-back."""
    clock = Clock()
    message = record(7, ALICE, "did you mean the other one", 60)
    conversation = conversation_of(
        clock,
        record(1, BOT, "alice: first this", 0, frozenset({ALICE})),
        record(2, ALICE, "carol: hang on", 10, frozenset({CAROL})),
        record(3, BOT, "alice: then that", 20, frozenset({ALICE})),
        record(4, BOB, "alice: or this", 30, frozenset({ALICE})),
        record(5, CAROL, "ok", 40),
        record(6, BOT, "anyone else?", 50),
        message,
    )
    values = values_of(message, conversation, "not_for_bot")
    assert values["bot_turns_naming_author"] == 2 and values["bot_latest_named_is_author"] == 1
    assert values["others_named_author"] == 1 and values["latest_to_name_author_is_bot"] == 0
    assert values["author_named_others"] == 1 and values["author_messages_recent"] == 1
    assert values["bot_turns_recent"] == 3 and values["bot_named_share"] == pytest.approx(2 / 3)
    assert values["others_named_share"] == pytest.approx(1 / 2)  # Bob named Alice; Carol named nobody
    assert values["log_messages_since_author"] == pytest.approx(math.log1p(2))  # Bob, Carol (the bot not counted)
    assert values["previous_is_bot"] == 1 and values["log_seconds_since_previous"] == pytest.approx(math.log1p(10))
    assert values["question_word"] == 1 and values["second_person"] == 1 and values["first_person"] == 0


def test_features_of_an_unnamed_answer_to_the_author() -> None:
    """The bot's turn naming nobody right after Alice's question reads as its answer to her."""
    clock = Clock()
    message = record(3, ALICE, "i tried that already", 20)
    conversation = conversation_of(
        clock,
        record(1, ALICE, "@parley why is my disk full?", 0, frozenset({BOT})),
        record(2, BOT, "check /var/log with du", 10),
        message,
    )
    values = values_of(message, conversation, "followup_implicit")
    assert values["bot_answered_author_unnamed"] == 1 and values["bot_named_nobody"] == 1
    assert values["author_previous_addressed_bot"] == 1 and values["author_addressed_bot"] == 1
    assert values["bot_latest_named_is_author"] == 0 and values["first_person"] == 1 and values["second_person"] == 0


def test_the_lexicon_weighs_the_words_and_the_words_after_their_rule() -> None:
    """`lexical` is the lexicon's bias plus each word's weight, and its weight as said after the deciding rule."""
    clock = Clock()
    answer = record(3, ALICE, "Thanks, that worked! thanks", 30)
    conversation = conversation_of(
        clock,
        record(1, ALICE, "@parley how do I fix grub?", 0, frozenset({BOT})),
        record(2, BOT, "alice: reinstall grub", 10, frozenset({ALICE})),
        answer,
    )
    lexicon = Lexicon(-0.5, {"thanks": 1.0, "worked": 0.25, "followup|worked": 0.5, "cut_in|worked": -3.0, "grub": 9.0})
    assert values_of(answer, conversation, "followup", lexicon)["lexical"] == pytest.approx(-0.5 + 1.0 + 0.25 + 0.5)
    assert values_of(answer, conversation, "cut_in", lexicon)["lexical"] == pytest.approx(-0.5 + 1.0 + 0.25 - 3.0)
    assert values_of(answer, conversation, "followup")["lexical"] == 0.0


@pytest.mark.parametrize("reason", CANDIDATE_REASONS)
def test_the_bot_scores_words_exactly_as_training_does(reason: str) -> None:
    """The bot's one-lookup-per-word lexicon score equals, to the last bit, the terms' score that training computes."""
    lexicon = load_model(SHIPPED_MODEL).lexicon
    texts = [
        "thanks, that worked",
        "ok ok it still fails, why?",
        "you said to reboot but my disk is gone",
        "yes",
        "",
        "zzz unknown words only",
    ]
    for text in texts:
        # The bot's tokens, as `features` finds them; training scores `message_terms` of the same text.
        assert lexicon.message_logit(_tokens(text), reason) == lexicon.logit(message_terms(text, reason)), text
    assert Lexicon(-0.5, {"cut_in|worked": -3.0}).message_logit(frozenset({"worked"}), "cut_in") == -3.5


def test_the_lexical_score_adds_to_the_trees_and_is_named_when_it_weighs_most() -> None:
    """The model's log-odds are the trees' plus `lexical`, which the explanation names like a split."""
    model = model_from_json(model_json(base=0.5, trees=[{"value": -0.25}]))
    values = [0.0] * len(FEATURES)
    values[FEATURES.index("lexical")] = 1.5
    assert model.logit(values) == pytest.approx(0.5 - 0.25 + 1.5)
    assert model.top_features(values) == [("lexical", 1.5)]


def test_the_trees_add_up_and_name_what_moved_the_score() -> None:
    """The score is the base plus each tree's leaf; the explanation names the splits that moved it, largest first."""
    model = model_from_json(
        model_json(
            base=0.5,
            trees=[
                {
                    "feature": "question",
                    "threshold": 0.5,
                    "value": 0.1,
                    "left": {"value": -0.4},
                    "right": {
                        "feature": "log_words",
                        "threshold": 2.0,
                        "value": 0.3,
                        "left": {"value": 0.2},
                        "right": {"value": 1.3},
                    },
                },
                {"value": -0.25},
            ],
        )
    )
    values = [0.0] * len(FEATURES)
    values[FEATURES.index("question")] = 1.0
    values[FEATURES.index("log_words")] = 3.0
    assert model.logit(values) == pytest.approx(0.5 + 1.3 - 0.25)
    top = model.top_features(values)
    assert [name for name, _ in top] == ["log_words", "question"] and [moved for _, moved in top] == pytest.approx(
        [1.0, 0.2]
    )
    values[FEATURES.index("question")] = 0.0
    assert model.logit(values) == pytest.approx(0.5 - 0.4 - 0.25)


def test_training_twice_writes_the_same_file(tmp_path: Path) -> None:
    """`eval/train_decider.py` on the same transcripts writes the same bytes twice, and the bot loads what it wrote."""
    import eval.train_decider as train_decider

    outputs = []
    for run in ("first", "second"):
        out = tmp_path / f"{run}.json"
        sample = str(ROOT / "eval" / "sample")
        assert train_decider.main(["--train", sample, "--dev", sample, "--out", str(out)]) == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert load_model(tmp_path / "first.json").names == FEATURES


def test_the_lexicon_learns_what_the_offset_leaves_unexplained() -> None:
    """Words of replies weigh up, of new questions down; a word the offset already explains, or a rare one, not."""
    import numpy as np

    import eval.train_decider as train_decider

    terms = [["yes", "done"]] * 20 + [["hello", "done"]] * 20 + [["sudo"]] * 20 + [["rare"]] * 2
    y = np.array([1.0] * 20 + [0.0] * 20 + [1.0] * 15 + [0.0] * 5 + [1.0] * 2)
    # `sudo` lines are replies 3 times in 4, and the offset (the trees' log-odds) already says so.
    offset = np.array([0.0] * 40 + [math.log(3)] * 20 + [0.0] * 2)
    lexicon = train_decider.fit_lexicon(terms, y, offset)
    assert lexicon.weights["yes"] > 0.5 and lexicon.weights["hello"] < -0.5
    assert abs(lexicon.weights.get("sudo", 0.0)) < 0.2 and "rare" not in lexicon.weights
    assert list(lexicon.weights) == sorted(lexicon.weights)


# --- The model file --------------------------------------------------------------------------------


def model_json(**changes: object) -> dict[str, object]:
    """A model answering only an author's first message since the bot's turn: logit 0 there, -2 elsewhere."""
    data: dict[str, object] = {
        "format": "parley-followup-trees/2",
        "features": list(FEATURES),
        "thresholds": {"normal": 0.6, "chatty": 0.4},
        "judge_band_logits": 0.5,
        "base": -1.0,
        "trees": [
            {
                "feature": "first_since_bot",
                "threshold": 0.5,
                "value": 0.0,
                "left": {"value": -1.0},
                "right": {"value": 1.0},
            }
        ],
        "lexicon": {"bias": 0.0, "weights": {"thanks": 0.0}},
    }
    data.update(changes)
    return data


def test_the_shipped_model_loads() -> None:
    """The model in the repository is a valid file for this version's features."""
    model = load_model(SHIPPED_MODEL)
    assert model.names == FEATURES and 0 < model.thresholds.chatty <= model.thresholds.normal < 1


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file"),
        ("{not json", "not JSON"),
        (json.dumps(model_json(features=["bogus"])), "retrain it"),
        (json.dumps(model_json(format="parley-followup-logreg/1")), "retrain it"),
        (json.dumps(model_json(trees=[])), "'trees' should be a list of 1 to"),
        (json.dumps(model_json(trees=[{"feature": "bogus", "threshold": 1, "value": 0}])), "trees[0].feature"),
        (json.dumps(model_json(trees=[{"feature": "question", "threshold": 1, "value": 0}])), "trees[0].left"),
        (json.dumps(model_json(base="1")), "'base' should be a finite number"),
        (json.dumps(model_json(thresholds={"normal": 2, "chatty": 0.1})), "'thresholds.normal'"),
        (json.dumps(model_json(judge_band_logits=-1)), "'judge_band_logits'"),
        (json.dumps(model_json(format="parley-followup-trees/1")), "retrain it"),
        (json.dumps(model_json(lexicon=None)), "'lexicon' should be an object"),
        (json.dumps(model_json(lexicon={"bias": 0.0, "weights": ["thanks"]})), "'lexicon.weights' should be"),
        (json.dumps(model_json(lexicon={"weights": {}})), "'lexicon.bias' should be a finite number"),
        (json.dumps(model_json(lexicon={"bias": 0, "weights": {"ok": "1"}})), "'lexicon.weights' of 'ok'"),
        (json.dumps(model_json())[:-1] + ', "lexicon": {"bias": 0, "weights": {"ok": NaN}}}', "of 'ok'"),
    ],
)
def test_a_bad_model_file_is_one_line_naming_it(tmp_path: Path, content: str | None, problem: str) -> None:
    """A missing, corrupt or mismatched model file is one line naming the file and the problem."""
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelFileError) as error:
        load_model(path)
    message = str(error.value)
    assert message.startswith(f"learned decider model {path}: ") and problem in message and "\n" not in message


@pytest.mark.slow
@pytest.mark.parametrize("content", [None, "{}"])
def test_the_bot_will_not_start_without_a_usable_model(tmp_path: Path, content: str | None) -> None:
    """`python bot.py` with DECIDER_MODEL naming a missing or corrupt file prints one line and exits 2."""
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(content)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DISCORD", "DECIDER"))}
    env.update(
        DISCORD_TOKEN="t", OPENAI_API_KEY="k", DECIDER_MODEL=str(path), DISCORD_API_BASE_URL="http://127.0.0.1:9"
    )
    result = subprocess.run(
        [sys.executable, str(ROOT / "bot.py")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"Configuration error: learned decider model {path}: ")


# --- The tier in the decider -----------------------------------------------------------------------


async def decide(model: LearnedModel, mode: str, judge_verdict: bool | None = None) -> tuple[str, int, float | None]:
    """Alice's first answer to the bot's turn after Bob cut in (`cut_in`, logit 0 under `model_json`)."""
    clock = Clock()
    answer = record(4, ALICE, "that worked", 20)
    conversation = conversation_of(
        clock,
        record(1, ALICE, "@parley help", 0, frozenset({BOT})),
        record(2, BOT, "alice: try this", 10, frozenset({ALICE})),
        record(3, BOB, "alice: or that", 15, frozenset({ALICE})),
        answer,
    )

    async def judge(message: MessageRecord, conversation: ChannelConversation) -> tuple[bool, str]:
        return bool(judge_verdict), "judged"

    decider = Decider(
        120, judge if judge_verdict is not None else None, clock=clock, modes={CHANNEL: mode}, learned=model
    )
    decision = await decider.decide(answer, conversation, BOT)
    return decision.reason, decider.judge_calls, decision.confidence


async def test_the_mode_moves_the_threshold() -> None:
    """A score of 0.5 is answered in a chatty channel (0.4), not in a normal one (0.6); mention-only skips the tier."""
    model = model_from_json(model_json())
    assert await decide(model, CHATTY) == ("learned_yes", 0, 0.5)
    assert await decide(model, NORMAL) == ("learned_no", 0, 0.5)
    assert (await decide(model, MENTION_ONLY))[0] == "mention_only"


async def test_the_judge_is_asked_only_inside_the_band() -> None:
    """With a judge, a score within the band of the threshold goes to it; one outside the band does not."""
    inside = model_from_json(model_json(judge_band_logits=0.5))  # |0 - logit(0.6)| = 0.41 < 0.5
    assert await decide(inside, NORMAL, judge_verdict=True) == ("judge_yes", 1, None)
    outside = model_from_json(model_json(judge_band_logits=0.3))
    assert await decide(outside, NORMAL, judge_verdict=True) == ("learned_no", 0, 0.5)


async def test_without_the_learned_tier_the_rules_decide() -> None:
    """Switching the tier off (`learned` disabled) leaves the follow-up rule's own answer."""
    clock = Clock()
    answer = record(3, ALICE, "that worked", 20)
    conversation = conversation_of(
        clock,
        record(1, ALICE, "@parley help", 0, frozenset({BOT})),
        record(2, BOT, "alice: try this", 10, frozenset({ALICE})),
        answer,
    )
    model = model_from_json(model_json())
    decider = Decider(120, clock=clock, learned=model, disabled_rules={"learned"})
    assert (await decider.decide(answer, conversation, BOT)).reason == "followup"


async def test_the_rules_yes_is_scored_only_with_the_veto() -> None:
    """A follow-up the rules answer stands without `learned_veto`; with it, a low score turns it down."""
    clock = Clock()
    second = record(4, ALICE, "and another thing", 30)
    conversation = conversation_of(
        clock,
        record(1, ALICE, "@parley help", 0, frozenset({BOT})),
        record(2, BOT, "alice: try this", 10, frozenset({ALICE})),
        record(3, ALICE, "ok", 20),
        record(5, BOT, "alice: and then this", 25, frozenset({ALICE})),
        second,
    )
    # Alice's first message since the bot's latest turn: a follow-up; this model scores it below any threshold.
    model = model_from_json(model_json(base=-5.0))
    plain = Decider(120, clock=clock, learned=model)
    assert (await plain.decide(second, conversation, BOT)).reason == "followup"
    vetoing = Decider(120, clock=clock, learned=model, learned_veto=True)
    decision = await vetoing.decide(second, conversation, BOT)
    assert (decision.reason, decision.respond) == ("learned_no", False)


def test_features_remember_the_bots_turns_beyond_the_look_back() -> None:
    """Three bot turns named Alice long before a 3-message look-back: the look-back sees none, the conversation all."""
    clock = Clock()
    early = [record(index, BOT, f"alice: step {index}", index, frozenset({ALICE})) for index in range(1, 4)]
    chatter = [record(index, BOB, "unrelated", index) for index in range(4, 10)]
    message = record(10, ALICE, "done", 10)
    conversation = conversation_of(clock, *early, *chatter, message)
    values = dict(zip(FEATURES, features(message, conversation, BOT, clock.now, "not_for_bot", 3), strict=True))
    assert values["bot_turns_naming_author"] == 0
    assert values["bot_turns_naming_author_all"] == 3


def test_a_bot_turn_naming_someone_twice_counts_once() -> None:
    """A bot reply to Alice that also mentions her is one turn naming her, not two."""
    clock = Clock()
    conversation = conversation_of(clock, record(1, ALICE, "@parley hi", 0, frozenset({BOT})))
    conversation.note_bot_message(
        MessageRecord(2, CHANNEL, BOT, "parley", "alice: hi", START, True, frozenset({ALICE}), ALICE)
    )
    assert conversation.bot_namings == {ALICE: 1}


async def test_an_implicit_followup_is_scored_without_the_veto() -> None:
    """The bot's unnamed answer to Alice makes her next line an implicit follow-up, which a low score turns down."""
    clock = Clock()
    answer = record(3, ALICE, "i tried that already", 20)
    conversation = conversation_of(
        clock,
        record(1, ALICE, "@parley why is my disk full?", 0, frozenset({BOT})),
        record(2, BOT, "check /var/log with du", 10),
        answer,
    )
    rules = Decider(120, clock=clock)
    assert (await rules.decide(answer, conversation, BOT)).reason == "followup_implicit"
    scored = Decider(120, clock=clock, learned=model_from_json(model_json(base=-5.0)))
    decision = await scored.decide(answer, conversation, BOT)
    assert (decision.reason, decision.respond) == ("learned_no", False)
