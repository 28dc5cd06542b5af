"""Replay labelled decision transcripts through Parley's conversation engine and score its decisions.

    python -m eval.replay [--json] [--judge] [--disable RULE]... [--followup-window SECONDS] [--model FILE] PATH...
    python -m eval.replay --ablation PATH...

Each PATH is a transcript (JSON Lines, see eval/sample/README.md) or a folder whose `*.jsonl`
files (recursively) are replayed in name order. Every file gets a fresh `ConversationManager` and
`ResponseDecider`, built with `config.Settings`' defaults, whose clock is the timestamp of the line
being replayed. The lines go through the path the bot takes for a live message:

- the bot's own line (author_id == bot_id) is its actual answer: a conversation is started if none
  is active, and the line is recorded as the bot's turn; it is not scored;
- any other line: with an active conversation, record it and ask `should_respond`; without one,
  ask `should_start_conversation`, and on yes start a conversation, record, ask `should_respond`;
  on no the decision is "no";
- the decision is compared with the line's `label` (null labels are context and not scored).

`reply_to` (a message id) becomes the engine's `reply_to_author_id`, `mentions` its `mention_ids`.
A line with `is_bot` true from another author is another bot's message, decided like any other.

The report gives micro-averaged precision, recall and F1 of "respond" over every labelled line,
the recall on the positives that do not mention the bot, and the true/false positives and
negatives per decision reason. `--json` prints the same as one JSON object on the last line.
`--judge` adds the configured LLM judge (real model calls: needs the bot's environment variables).
`--disable RULE` switches one of `ResponseDecider.RULES` off (repeatable), for ablations;
`--ablation` prints a markdown table of the scores with each rule disabled in turn, the learned
follow-up tier (`--model`, the shipped `decider_model.json` by default; deciding/followup.py) among them, and
with the tier's veto of the follow-up rules' "yes" (`--learned-veto`, off in the bot) added.
Lines whose learned score falls in the judge's uncertain band are counted: what a judge would cost.

A malformed transcript stops the replay with `file:line: what is wrong` and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError

from addressing import calls_by_name
from config import Settings, describe_settings_error
from conversation import Clock, ConversationManager
from deciding.decider import DecisionPolicy, Judge, ResponseDecider
from deciding.followup import SHIPPED_MODEL, LearnedModel, ModelFileError, load_model
from records import MessageRecord

DeciderFactory = Callable[[Clock], DecisionPolicy]


class ReplayError(Exception):
    """A transcript that cannot be replayed; the message reads `file:line: what is wrong`."""


# --- Transcripts ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TranscriptLine:
    """One message line of a transcript, converted to the engine's `MessageRecord`."""

    line: int
    record: MessageRecord
    label: bool | None


@dataclass(frozen=True, slots=True)
class Transcript:
    """A checked transcript: its header's channel and bot, and its message lines in file order."""

    path: str
    channel_id: int
    bot_id: int
    bot_name: str
    lines: list[TranscriptLine]


def _setting_default(name: str) -> Any:
    return Settings.model_fields[name].default


def _field(
    obj: dict[str, Any], name: str, kinds: type | tuple[type, ...], where: str, *, optional: bool = False
) -> Any:
    if name not in obj:
        if optional:
            return None
        raise ReplayError(f"{where}: missing field {name!r}")
    value = obj[name]
    if value is None and optional:
        return None
    # bool is an int in Python: an id of `true` is as wrong as one of `"12"`.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _as_tuple(kinds)):
        expected = " or ".join(kind.__name__ for kind in _as_tuple(kinds)) + (" or null" if optional else "")
        raise ReplayError(f"{where}: field {name!r} should be {expected}, not {type(value).__name__}")
    return value


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _timestamp(text: str, where: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ReplayError(f"{where}: timestamp {text!r} is not ISO 8601") from None
    if moment.tzinfo is None:
        raise ReplayError(f"{where}: timestamp {text!r} has no time zone (expected UTC, e.g. +00:00)")
    if moment.utcoffset() != timedelta(0):
        raise ReplayError(f"{where}: timestamp {text!r} is not UTC")
    return moment.astimezone(UTC)


def load_transcript(path: str | Path) -> Transcript:
    """Parse and check a whole transcript; raises `ReplayError` naming the first bad line."""
    name = str(path)
    meta: dict[str, Any] | None = None
    lines: list[TranscriptLine] = []
    authors: dict[int, int] = {}  # message id -> author id, to resolve `reply_to`
    for number, raw in enumerate(_read(path).splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{name}:{number}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ReplayError(f"{where}: bad JSON: {error.msg} (column {error.colno})") from None
        if not isinstance(obj, dict):
            raise ReplayError(f"{where}: expected a JSON object, not {type(obj).__name__}")
        kind = _field(obj, "type", str, where)
        if meta is None:
            meta = _meta_header(obj, kind, where)
            continue
        if kind == "meta":
            raise ReplayError(f"{where}: a second meta header")
        if kind != "message":
            raise ReplayError(f'{where}: unknown line type {kind!r} (expected "message")')
        record, label = _message_line(obj, where, meta, authors)
        lines.append(TranscriptLine(number, record, label))
    if meta is None:
        raise ReplayError(f"{name}:1: missing meta header (the file is empty)")
    return Transcript(name, meta["channel_id"], meta["bot_id"], meta.get("bot_name") or "Parley", lines)


def _read(path: str | Path) -> str:
    name = str(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReplayError(f"{name}: no such file") from None
    except UnicodeDecodeError as error:
        raise ReplayError(f"{name}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise ReplayError(f"{name}: cannot read: {error.strerror}") from None


def _meta_header(obj: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    if kind != "meta":
        raise ReplayError(f'{where}: missing meta header (the first line must have "type": "meta")')
    _field(obj, "channel_id", int, where)
    _field(obj, "bot_id", int, where)
    _field(obj, "bot_name", str, where, optional=True)
    _field(obj, "source", str, where, optional=True)
    return obj


def _message_line(
    obj: dict[str, Any], where: str, meta: dict[str, Any], authors: dict[int, int]
) -> tuple[MessageRecord, bool | None]:
    """A message line as the engine's record and its label; `authors` learns its author for later replies."""
    message_id = _field(obj, "id", int, where)
    author_id = _field(obj, "author_id", int, where)
    author = _field(obj, "author", str, where)
    is_bot = _field(obj, "is_bot", bool, where)
    content = _field(obj, "content", str, where)
    timestamp = _timestamp(_field(obj, "timestamp", str, where), where)
    mentions = _field(obj, "mentions", list, where)
    if not all(isinstance(m, int) and not isinstance(m, bool) for m in mentions):
        raise ReplayError(f"{where}: field 'mentions' should be a list of ids (int)")
    reply_to = _field(obj, "reply_to", int, where, optional=True)
    label = _label(obj, where, own=author_id == meta["bot_id"], is_bot=is_bot)
    reply_to_author_id = None
    if reply_to is not None:
        if reply_to not in authors:
            raise ReplayError(f"{where}: reply_to {reply_to} names no earlier message of the transcript")
        reply_to_author_id = authors[reply_to]
    authors[message_id] = author_id
    record = MessageRecord(
        message_id=message_id,
        channel_id=meta["channel_id"],
        author_id=author_id,
        author=author,
        content=content,
        timestamp=timestamp,
        is_bot=is_bot,
        mention_ids=frozenset(mentions),
        reply_to_author_id=reply_to_author_id,
    )
    return record, label


def _label(obj: dict[str, Any], where: str, *, own: bool, is_bot: bool) -> bool | None:
    """A line's label: the bot's own lines carry none; every other line must say (null for context lines)."""
    if own and not is_bot:
        raise ReplayError(f"{where}: author_id is the bot's id but is_bot is false")
    if own:
        if _field(obj, "label", bool, where, optional=True) is not None:
            raise ReplayError(f"{where}: the bot's own line carries a label")
        return None
    if "label" not in obj:
        raise ReplayError(f"{where}: missing field 'label' (null for context lines)")
    label: bool | None = _field(obj, "label", bool, where, optional=True)
    return label


def transcript_paths(paths: Iterable[str | Path]) -> list[Path]:
    """The files to replay: each file as given, each folder's `*.jsonl` (recursively) in name order."""
    found: list[Path] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not files:
                raise ReplayError(f"{path}: no *.jsonl transcripts in this folder")
            found.extend(files)
        elif path.is_file():
            found.append(path)
        else:
            raise ReplayError(f"{path}: no such file or folder")
    return found


# --- Replaying --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScoredDecision:
    """The decider's answer on one non-bot line, with the line's label (None: context, unscored)."""

    path: str
    line: int
    message_id: int
    label: bool | None
    respond: bool
    reason: str
    mentions_bot: bool
    judged: bool = False  # the LLM judge was asked about this line
    uncertain: bool = False  # the learned score fell in the judge's band: a judge would have been asked


JudgeFactory = Callable[[Transcript], Judge]


def build_decider(
    clock: Clock,
    *,
    followup_window_seconds: float | None = None,
    disabled_rules: Iterable[str] = frozenset(),
    judge: Judge | None = None,
    judge_timeout_seconds: float | None = None,
    learned: LearnedModel | None = None,
    learned_veto: bool = False,
) -> ResponseDecider:
    """The bot's `ResponseDecider` on `clock`, with `Settings`' defaults for what is not given (no learned tier)."""
    if followup_window_seconds is None:
        followup_window_seconds = _setting_default("followup_window_seconds")
    if judge_timeout_seconds is None:
        judge_timeout_seconds = _setting_default("judge_timeout_seconds")
    return ResponseDecider(
        followup_window_seconds,
        judge,
        judge_timeout_seconds=judge_timeout_seconds,
        clock=clock,
        disabled_rules=disabled_rules,
        learned=learned,
        learned_veto=learned_veto,
    )


async def replay_transcript(
    transcript: Transcript,
    *,
    followup_window_seconds: float | None = None,
    disabled_rules: Iterable[str] = frozenset(),
    make_judge: JudgeFactory | None = None,
    judge_timeout_seconds: float | None = None,
    make_decider: DeciderFactory | None = None,
    timeout_seconds: float | None = None,
    max_messages: int | None = None,
    learned: LearnedModel | None = None,
    learned_veto: bool = False,
    names_as_text: bool = False,
) -> list[ScoredDecision]:
    """Feed one parsed transcript through a fresh manager and decider; a decision per non-bot line.

    A line that names the bot without @mentioning it is marked as calling it by name, as Parley marks a Discord
    message; with `names_as_text`, the transcript's mentions of the bot count as its name written in the text
    (on IRC they are), so the call-by-name rule decides them instead of the mention rule.

    The decider is the bot's `ResponseDecider` (window, disabled rules and a judge built for this
    transcript's bot by `make_judge`), unless `make_decider` builds another policy on the clock.
    Settings' defaults stand in for every value not given.
    """
    now = datetime.min.replace(tzinfo=UTC)

    def clock() -> datetime:
        return now

    manager = ConversationManager(
        _setting_default("conversation_timeout_seconds") if timeout_seconds is None else timeout_seconds,
        max_messages=_setting_default("max_conversation_messages") if max_messages is None else max_messages,
        clock=clock,
    )
    decider = (
        make_decider(clock)
        if make_decider is not None
        else build_decider(
            clock,
            followup_window_seconds=followup_window_seconds,
            disabled_rules=disabled_rules,
            judge=make_judge(transcript) if make_judge is not None else None,
            judge_timeout_seconds=judge_timeout_seconds,
            learned=learned,
            learned_veto=learned_veto,
        )
    )
    bot_id = transcript.bot_id
    decisions: list[ScoredDecision] = []
    for item in transcript.lines:
        message = item.record
        now = message.timestamp
        if message.author_id == bot_id:
            _record_own_answer(manager, message)
            continue
        decisions.append(await _decide(manager, decider, transcript, _as_heard(item, transcript, names_as_text)))
    return decisions


def _as_heard(item: TranscriptLine, transcript: Transcript, names_as_text: bool) -> TranscriptLine:
    """The line as Parley's edge would hand it on: whether it calls the bot by name, unless it @mentions it."""
    record = item.record
    if names_as_text and transcript.bot_id in record.mention_ids:
        record = replace(record, mention_ids=record.mention_ids - {transcript.bot_id})
    elif transcript.bot_id in record.mention_ids:
        return item
    called = calls_by_name(record.content, [transcript.bot_name])
    return replace(item, record=replace(record, called_by_name=called)) if called or record is not item.record else item


async def _decide(
    manager: ConversationManager, decider: DecisionPolicy, transcript: Transcript, item: TranscriptLine
) -> ScoredDecision:
    """The decision on a member's line, as the bot would take it live."""
    message, channel, bot_id = item.record, transcript.channel_id, transcript.bot_id
    calls_before = getattr(decider, "judge_calls", 0)
    uncertain_before = getattr(decider, "uncertain", 0)
    if manager.get(channel) is None:
        start, reason = decider.should_start_conversation(message, bot_id)
        if start:
            manager.start(channel, initial_messages=[])
    conversation = manager.record_message(channel, message)
    if conversation is None:
        respond = False
    else:
        respond, reason = await decider.should_respond(message, conversation, bot_id)
    return ScoredDecision(
        path=transcript.path,
        line=item.line,
        message_id=message.message_id,
        label=item.label,
        respond=respond,
        reason=reason,
        mentions_bot=bot_id in message.mention_ids,
        judged=getattr(decider, "judge_calls", 0) > calls_before,
        uncertain=getattr(decider, "uncertain", 0) > uncertain_before,
    )


def _record_own_answer(manager: ConversationManager, message: MessageRecord) -> None:
    """The bot's actual answer: it speaks only when engaged, so engage first if need be."""
    channel = message.channel_id
    if manager.get(channel) is None:
        manager.start(channel, initial_messages=[])
    conversation = manager.record_message(channel, message)
    assert conversation is not None
    manager.record_bot_response(channel, conversation.llm_history, message.message_id)


def replay_file(path: str | Path, **options: Any) -> list[ScoredDecision]:
    """Replay one transcript file (see `replay_transcript` for the options); raises `ReplayError`."""
    return asyncio.run(replay_transcript(load_transcript(path), **options))


# --- Scoring ----------------------------------------------------------------------------------


@dataclass(slots=True)
class ReasonCounts:
    """Outcomes of the labelled decisions given for one reason."""

    true_positives: int = 0
    false_positives: int = 0
    true_negatives: int = 0
    false_negatives: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "tp": self.true_positives,
            "fp": self.false_positives,
            "tn": self.true_negatives,
            "fn": self.false_negatives,
        }


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


@dataclass(slots=True)
class Report:
    """Micro-averaged scores of "respond" over every labelled line of the replayed files."""

    files: int = 0
    messages: int = 0  # labelled lines scored
    positives: int = 0
    true_positives: int = 0
    false_positives: int = 0
    nonmention_positives: int = 0
    nonmention_true_positives: int = 0
    judge_calls: int = 0  # on every non-bot line, context included: what the replay cost
    uncertain: int = 0  # lines a judge would be asked about (the learned tier's band), context included
    by_reason: dict[str, ReasonCounts] = field(default_factory=dict)

    @property
    def precision(self) -> float:
        return _ratio(self.true_positives, self.true_positives + self.false_positives)

    @property
    def recall(self) -> float:
        return _ratio(self.true_positives, self.positives)

    @property
    def f1(self) -> float:
        return _ratio(2 * self.precision * self.recall, self.precision + self.recall)

    @property
    def nonmention_recall(self) -> float:
        return _ratio(self.nonmention_true_positives, self.nonmention_positives)

    @property
    def judge_calls_per_100(self) -> float:
        return _ratio(100 * self.judge_calls, self.messages)

    @property
    def uncertain_per_100(self) -> float:
        return _ratio(100 * self.uncertain, self.messages)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "messages": self.messages,
            "positives": self.positives,
            "true_positives": self.true_positives,
            "false_positives": self.false_positives,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "f1": round(self.f1, 4),
            "nonmention_positives": self.nonmention_positives,
            "nonmention_recall": round(self.nonmention_recall, 4),
            "judge_calls": self.judge_calls,
            "judge_calls_per_100": round(self.judge_calls_per_100, 2),
            "uncertain": self.uncertain,
            "uncertain_per_100": round(self.uncertain_per_100, 2),
            "by_reason": {reason: counts.to_dict() for reason, counts in sorted(self.by_reason.items())},
        }


def score(decisions: Iterable[ScoredDecision], files: int = 0) -> Report:
    """Count the decisions against their labels (context lines only add their judge calls)."""
    report = Report(files=files)
    for decision in decisions:
        report.judge_calls += decision.judged
        report.uncertain += decision.uncertain
        if decision.label is None:
            continue
        report.messages += 1
        counts = report.by_reason.setdefault(decision.reason, ReasonCounts())
        if decision.label:
            report.positives += 1
            if not decision.mentions_bot:
                report.nonmention_positives += 1
            if decision.respond:
                report.true_positives += 1
                counts.true_positives += 1
                report.nonmention_true_positives += not decision.mentions_bot
            else:
                counts.false_negatives += 1
        elif decision.respond:
            report.false_positives += 1
            counts.false_positives += 1
        else:
            counts.true_negatives += 1
    return report


def replay_paths(paths: Iterable[str | Path], **options: Any) -> Report:
    """Replay every transcript under `paths` and score them together; raises `ReplayError`."""
    files = transcript_paths(paths)
    transcripts = [load_transcript(path) for path in files]  # check every file before replaying any

    async def run() -> list[ScoredDecision]:
        decisions: list[ScoredDecision] = []
        for transcript in transcripts:
            decisions.extend(await replay_transcript(transcript, **options))
        return decisions

    return score(asyncio.run(run()), files=len(files))


def format_report(report: Report) -> str:
    """The human-readable report."""
    out = [
        f"files: {report.files}   labelled messages: {report.messages}   positives: {report.positives}",
        f"precision {report.precision:.3f}   recall {report.recall:.3f}   F1 {report.f1:.3f}",
        f"recall on positives not mentioning the bot: {report.nonmention_recall:.3f}"
        f" ({report.nonmention_true_positives}/{report.nonmention_positives})",
    ]
    if report.judge_calls:
        out.append(f"judge calls: {report.judge_calls} ({report.judge_calls_per_100:.1f} per 100 labelled messages)")
    if report.uncertain:
        out.append(
            f"in the judge's uncertain band: {report.uncertain} ({report.uncertain_per_100:.1f} per 100 labelled"
            " messages; a configured judge is asked about these)"
        )
    answered = {r: c for r, c in report.by_reason.items() if c.true_positives or c.false_positives}
    ignored = {r: c for r, c in report.by_reason.items() if c.true_negatives or c.false_negatives}
    out.append("")
    out.append("answered, by reason            true pos  false pos  precision")
    for reason, c in sorted(answered.items(), key=lambda kv: -(kv[1].true_positives + kv[1].false_positives)):
        total = c.true_positives + c.false_positives
        out.append(f"  {reason:<28} {c.true_positives:>9} {c.false_positives:>10} {c.true_positives / total:>10.3f}")
    out.append("ignored, by reason             true neg  false neg")
    for reason, c in sorted(ignored.items(), key=lambda kv: -(kv[1].true_negatives + kv[1].false_negatives)):
        out.append(f"  {reason:<28} {c.true_negatives:>9} {c.false_negatives:>10}")
    return "\n".join(out)


def ablation(paths: Sequence[str | Path], **options: Any) -> str:
    """A markdown table: the decider with all its rules, then with each rule disabled in turn."""
    rows = [("all rules", replay_paths(paths, **options))]
    for rule in ResponseDecider.RULES:
        rows.append((f"without `{rule}`", replay_paths(paths, **options, disabled_rules={rule})))
    explicit = {"mention", "reply_to_bot"}
    only_explicit = set(ResponseDecider.RULES) - explicit
    rows.append(
        ("explicit only (`mention`, `reply_to_bot`)", replay_paths(paths, **options, disabled_rules=only_explicit))
    )
    if options.get("learned") is not None:
        rows.append(("with `--learned-veto`", replay_paths(paths, **{**options, "learned_veto": True})))
    out = [
        "| decider | precision | recall | F1 | non-mention recall |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        out.append(f"| {name} | {r.precision:.3f} | {r.recall:.3f} | {r.f1:.3f} | {r.nonmention_recall:.3f} |")
    return "\n".join(out)


# --- Command line -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.replay",
        description="Replay labelled decision transcripts through Parley's decider and score it.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a transcript, or a folder of *.jsonl")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object (last line)")
    parser.add_argument(
        "--judge", action="store_true", help="add the configured LLM judge (real model calls; needs the bot's env)"
    )
    parser.add_argument(
        "--disable",
        action="append",
        default=[],
        metavar="RULE",
        choices=ResponseDecider.RULES,
        help=f"switch a decider rule off (repeatable); one of: {', '.join(ResponseDecider.RULES)}",
    )
    parser.add_argument(
        "--followup-window",
        type=float,
        metavar="SECONDS",
        help="the follow-up window (default: the followup_window_seconds setting's default)",
    )
    parser.add_argument(
        "--model",
        type=Path,
        default=SHIPPED_MODEL,
        metavar="FILE",
        help="the learned follow-up tier's model (default: the shipped one); `--disable learned` turns the tier off",
    )
    parser.add_argument(
        "--learned-veto",
        action="store_true",
        help='let the learned tier overrule the follow-up rules\' "yes" too (off in the bot: it costs speed)',
    )
    parser.add_argument(
        "--names-as-text",
        action="store_true",
        help="count a transcript's mentions of the bot as its name written in the text, to score the call-by-name"
        " rule (IRC has no @mentions: writing a nick is one)",
    )
    parser.add_argument(
        "--ablation", action="store_true", help="print a markdown table of the scores with each rule disabled in turn"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.ablation and (args.judge or args.disable):
        parser.error("--ablation goes without --judge and --disable")
    try:
        learned = load_model(args.model)
    except ModelFileError as error:
        print(error, file=sys.stderr)
        return 2
    options: dict[str, Any] = {
        "followup_window_seconds": args.followup_window,
        "learned": learned,
        "learned_veto": args.learned_veto,
        "names_as_text": args.names_as_text,
    }
    if args.judge:
        # Only here: the judge needs the bot's configuration (environment) and a model client.
        from agent import build_judge

        try:
            # A replay never connects to Discord: only the model settings matter.
            settings = Settings(discord_token=SecretStr("unused by replay"))
        except ValidationError as error:
            print(describe_settings_error(error), file=sys.stderr)
            return 2

        def make_judge(transcript: Transcript) -> Judge:
            return build_judge(settings, bot_name=transcript.bot_name, bot_user_id=transcript.bot_id)

        options["make_judge"] = make_judge
        options["judge_timeout_seconds"] = settings.judge_timeout_seconds
    try:
        if args.ablation:
            print(ablation(args.paths, **options))
            return 0
        report = replay_paths(args.paths, **options, disabled_rules=frozenset(args.disable))
    except ReplayError as error:
        print(error, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
