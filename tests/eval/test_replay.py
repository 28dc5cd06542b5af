"""Tests for eval/replay.py: hand-labelled transcripts through the bot's own engine, scored exactly."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

import eval.replay as replay
from conversation import ChannelConversation
from deciding.decider import ResponseDecider
from deciding.followup import SHIPPED_MODEL, load_model
from records import MessageRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
BASIC = FIXTURES / "basic.jsonl"
THREADS = FIXTURES / "threads.jsonl"
GAP = FIXTURES / "gap.jsonl"

META = {"type": "meta", "source": "test", "channel_id": 500, "bot_id": 1, "bot_name": "parley"}


def line(**overrides: object) -> dict:
    message = {
        "type": "message",
        "id": 1,
        "author_id": 10,
        "author": "alice",
        "is_bot": False,
        "content": "parley: hi",
        "timestamp": "2024-05-01T12:00:00+00:00",
        "mentions": [1],
        "reply_to": None,
        "label": True,
    }
    message.update(overrides)
    return message


def write(path: Path, *rows: dict | str) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def reasons(decisions: list[replay.ScoredDecision]) -> list[tuple[int, bool | None, bool, str]]:
    return [(d.line, d.label, d.respond, d.reason) for d in decisions]


def test_hand_labelled_transcript_scores_exactly() -> None:
    """A mention and a follow-up answered, chatter and side talk ignored, one miss and one false alarm."""
    decisions = replay.replay_file(BASIC)
    assert reasons(decisions) == [
        (2, None, False, "no_conversation"),  # context line: decided, not scored
        (3, True, True, "mention"),
        (5, True, True, "followup"),
        (6, False, False, "not_for_bot"),
        (7, False, False, "addressed_to_other"),
        (8, False, False, "already_followed_up"),
        (9, True, False, "not_for_bot"),
        (11, False, True, "followup"),
    ]
    report = replay.score(decisions, files=1)
    assert (report.messages, report.positives, report.true_positives, report.false_positives) == (7, 3, 2, 1)
    assert report.precision == pytest.approx(2 / 3) and report.recall == pytest.approx(2 / 3)
    assert report.f1 == pytest.approx(2 / 3)
    assert report.nonmention_recall == pytest.approx(1 / 2)
    assert {reason: counts.to_dict() for reason, counts in report.by_reason.items()} == {
        "mention": {"tp": 1, "fp": 0, "tn": 0, "fn": 0},
        "followup": {"tp": 1, "fp": 1, "tn": 0, "fn": 0},
        "not_for_bot": {"tp": 0, "fp": 0, "tn": 1, "fn": 1},
        "addressed_to_other": {"tp": 0, "fp": 0, "tn": 1, "fn": 0},
        "already_followed_up": {"tp": 0, "fp": 0, "tn": 1, "fn": 0},
    }


def test_unnamed_answer_and_cut_in() -> None:
    """An answer naming nobody still has its asker follow up; someone cutting in takes the thread."""
    assert reasons(replay.replay_file(THREADS)) == [
        (2, True, True, "mention"),
        (4, True, True, "followup_implicit"),
        (6, False, False, "addressed_to_other"),
        (7, False, False, "cut_in"),
    ]


def test_clock_follows_the_transcript() -> None:
    """Transcript time drives the engine: a follow-up 15 s later counts, a 10-minute gap ends the conversation."""
    assert reasons(replay.replay_file(GAP, timeout_seconds=120)) == [
        (2, True, True, "mention"),
        (4, True, True, "followup"),
        (5, False, False, "no_conversation"),
    ]


def test_follow_up_window_is_measured_in_transcript_time() -> None:
    """A window shorter than the 15 s pause turns the same follow-up down as outside the window."""
    decisions = replay.replay_file(GAP, followup_window_seconds=10)
    assert reasons(decisions)[1] == (4, True, False, "outside_window")


def test_disabled_rule_is_skipped() -> None:
    """`disabled_rules` switches a rule off, which is what the ablation measures."""
    decisions = replay.replay_file(BASIC, disabled_rules={"followup"})
    assert reasons(decisions)[2] == (5, True, False, "not_for_bot")
    with pytest.raises(ValueError, match="unknown decider rules"):
        ResponseDecider(disabled_rules={"no_such_rule"})


def test_judge_calls_are_counted() -> None:
    """With a (fake) judge, ambiguous lines go to it, its verdicts score, and its calls are counted."""
    asked: list[tuple[str, int]] = []

    def make_judge(transcript: replay.Transcript):
        async def judge(message: MessageRecord, conversation: ChannelConversation) -> tuple[bool, str, float]:
            asked.append((transcript.bot_name, message.message_id))
            return message.author == "carol", "fake", 0.5

        return judge

    decisions = replay.replay_file(BASIC, make_judge=make_judge)
    # bob's chatter, alice's second message and carol's question are ambiguous; the rest is not.
    assert asked == [("parley", 105), ("parley", 107), ("parley", 108)]
    report = replay.score(decisions, files=1)
    assert report.judge_calls == 3 and report.judge_calls_per_100 == pytest.approx(300 / 7)
    assert report.by_reason["judge_yes"].true_positives == 1 and report.recall == pytest.approx(1.0)


def test_cli_prints_json_on_the_last_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`--json` prints the report as one JSON object on the last line of stdout (here the rules alone)."""
    assert replay.main([str(BASIC), "--json", "--disable", "learned"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"precision", "recall", "f1", "messages", "positives", "judge_calls", "by_reason"} <= report.keys()
    assert (report["messages"], report["positives"], report["judge_calls"]) == (7, 3, 0)
    assert report["precision"] == pytest.approx(2 / 3, abs=1e-4) and report["f1"] == pytest.approx(2 / 3, abs=1e-4)
    assert report["by_reason"]["followup"] == {"tp": 1, "fp": 1, "tn": 0, "fn": 0}


def test_cli_prints_a_readable_report(capsys: pytest.CaptureFixture[str]) -> None:
    """Without `--json` the report is plain text with the headline figures and the reasons."""
    assert replay.main([str(BASIC), "--disable", "learned"]) == 0
    out = capsys.readouterr().out
    assert "precision 0.667   recall 0.667   F1 0.667" in out
    assert "not mentioning the bot: 0.500 (1/2)" in out and "already_followed_up" in out


def test_folders_are_walked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder argument replays every *.jsonl under it (other files are ignored), micro-averaged."""
    nested = tmp_path / "nested"
    nested.mkdir()
    shutil.copy(BASIC, tmp_path / "a.jsonl")
    shutil.copy(THREADS, nested / "b.jsonl")
    (tmp_path / "notes.txt").write_text("not a transcript")
    assert replay.main([str(tmp_path), str(GAP), "--json", "--disable", "learned"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (report["files"], report["messages"], report["positives"]) == (3, 7 + 4 + 3, 3 + 2 + 2)
    assert (report["true_positives"], report["false_positives"]) == (2 + 2 + 2, 1)


def test_ablation_table_has_a_row_per_rule() -> None:
    """The ablation table shows the full decider, each rule switched off, and explicit-only."""
    table = replay.ablation([BASIC]).splitlines()
    assert table[2].startswith("| all rules | 0.667 | 0.667 | 0.667 |")
    assert len(table) == 2 + 1 + len(ResponseDecider.RULES) + 1
    assert "| without `followup` | 1.000 | 0.333 | 0.500 |" in "\n".join(table)


@pytest.mark.parametrize(
    ("rows", "bad_line", "complaint"),
    [
        ([META, "{not json"], 2, "bad JSON"),
        ([META, {k: v for k, v in line().items() if k != "author_id"}], 2, "missing field 'author_id'"),
        ([META, line(timestamp="2024-05-01T12:00:00")], 2, "no time zone"),
        ([META, line(timestamp="2024-05-01T12:00:00+02:00")], 2, "is not UTC"),
        ([META, line(mentions="1")], 2, "field 'mentions' should be list"),
        ([META, line(id=1), line(id=True)], 3, "field 'id' should be int"),
        ([line()], 1, "missing meta header"),
        ([{k: v for k, v in META.items() if k != "bot_id"}], 1, "missing field 'bot_id'"),
        ([META, line(reply_to=77)], 2, "reply_to 77 names no earlier message"),
    ],
)
def test_malformed_transcript_exits_2_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list, bad_line: int, complaint: str
) -> None:
    """A malformed line stops the replay with `file:line: what is wrong` on stderr and exit code 2."""
    path = write(tmp_path / "bad.jsonl", *rows)
    assert replay.main([str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err.startswith(f"{path}:{bad_line}: ") and complaint in captured.err


def test_nonexistent_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist is reported like a malformed file, not with a traceback."""
    missing = tmp_path / "nope.jsonl"
    assert replay.main([str(BASIC), str(missing)]) == 2
    assert capsys.readouterr().err.strip() == f"{missing}: no such file or folder"


def test_reply_to_resolves_the_replied_author(tmp_path: Path) -> None:
    """`reply_to` names a message id; the engine gets that message's author, so a reply to the bot counts."""
    path = write(
        tmp_path / "reply.jsonl",
        META,
        line(id=1, content="parley: hi", mentions=[1]),
        line(id=2, author_id=1, author="parley", is_bot=True, content="hello", mentions=[], label=None),
        line(id=3, author_id=11, author="bob", content="and you?", mentions=[], reply_to=2, label=True),
    )
    assert [d.reason for d in replay.replay_file(path)] == ["mention", "reply_to_bot"]


def test_ablation_with_the_learned_tier_adds_its_veto() -> None:
    """With a model, the ablation also shows the tier's veto of the follow-up rules' "yes" switched on."""
    table = replay.ablation([BASIC], learned=load_model(SHIPPED_MODEL))
    assert "| without `learned` |" in table and "| with `--learned-veto` |" in table


def test_replaying_twice_gives_the_same_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`eval/replay.py --json` with the shipped model prints the same report on two runs."""
    sample = str(Path(__file__).resolve().parents[2] / "eval" / "sample")
    reports = []
    for _ in range(2):
        assert replay.main([sample, "--json"]) == 0
        reports.append(capsys.readouterr().out.strip().splitlines()[-1])
    assert reports[0] == reports[1] and json.loads(reports[0])["messages"] == 526


def test_a_call_by_name_is_scored_with_its_own_reason(tmp_path: Path) -> None:
    """A line naming the bot without mentioning it is decided as a call by name; an aside about it is not. With
    `names_as_text`, the transcript's mentions count as the name written out, so the name rule decides them."""
    path = write(
        tmp_path / "names.jsonl",
        META,
        line(id=1, content="parley, how do I mount a disk?", mentions=[]),
        line(
            id=2,
            author_id=11,
            author="bob",
            content="I asked parley yesterday",
            mentions=[],
            label=False,
            timestamp="2024-05-01T12:30:00+00:00",
        ),
        line(id=3, content="parley: and unmount?", timestamp="2024-05-01T13:00:00+00:00"),
    )
    assert [reason for *_, reason in reasons(replay.replay_file(path))] == [
        "called_by_name",
        "no_conversation",
        "mention",
    ]
    transcript = replay.load_transcript(path)
    decisions = asyncio.run(replay.replay_transcript(transcript, names_as_text=True))
    assert [d.reason for d in decisions] == ["called_by_name", "no_conversation", "called_by_name"]
