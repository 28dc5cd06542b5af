"""Build Parley's IRC evaluation set: "should the bot answer?" transcripts from the public IRC corpus.

    python eval/build_irc_eval.py data/irc-dev                      # download the dev split and convert it
    python eval/build_irc_eval.py --split train data/irc-train      # the train split (2,107 transcripts, ~360 MB)
    python eval/build_irc_eval.py --source RAW_DIR data/irc-dev     # convert files you already have

The corpus is the one of *A Large-Scale Corpus for Conversation Disentanglement*, Kummerfeld et al.,
ACL 2019 (doi:10.18653/v1/P19-1374, https://www.jkk.name/irc-disentanglement), #ubuntu IRC logs whose
reply links were annotated by people; its data is licensed CC BY 4.0. Each `<log>.ascii.txt` with its
`<log>.annotation.txt` becomes one transcript per regular participant X (at least 8 messages in the
annotated part, at least 3 replies to them), with X playing the bot: a message by anyone else is labelled
true when an annotated link makes it a reply to one of X's messages, false otherwise, and the 200 lines
before the annotated part are unlabelled context. Nick mentions become ids, and the messages of one
minute are spread evenly over its seconds (the logs have minute resolution). The format is described in
eval/sample/README.md; `python -m eval.replay OUT_DIR` scores the decider on the result.

Without --source the files are downloaded from the corpus's GitHub repository at a pinned commit, so
the dev split gives the 91 transcripts (19,681 labelled messages) the README's tables were measured on.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPOSITORY = "jkkummerfeld/irc-disentanglement"
COMMIT = "022da5af88f698abe01b36ced82216248e540ada"
LISTING_URL = "https://api.github.com/repos/{repository}/contents/data/{split}?ref={commit}"
RAW_URL = "https://raw.githubusercontent.com/{repository}/{commit}/data/{split}/{name}"

LINE = re.compile(r"^\[(\d\d):(\d\d)\] <([^>]+)> ?(.*)$")
NICK = re.compile(r"[A-Za-z0-9_\-\[\]\\^{}|`]+")
# The corpus annotates each log from its line 1000 on; the lines before it are context.
ANNOTATED_FROM = 1000
CONTEXT_LINES = 200
# Who can play the bot: someone who spoke and was replied to often enough to be scored on.
MIN_OWN_MESSAGES, MIN_REPLIES = 8, 3

Reader = Callable[[str], str]


def participant_id(nick: str) -> int:
    """A stable Discord-like id for an IRC nick (case-insensitive, as IRC nicks are)."""
    return 10**17 + zlib.crc32(nick.lower().encode())


def convert_log(split: str, name: str, read: Reader, out: Path) -> int:
    """Write the transcripts of log `name` of `split` (read through `read`) into `out`; returns how many."""
    lines = read(f"{name}.ascii.txt").split("\n")
    parents = reply_links(read(f"{name}.annotation.txt"))
    messages = {
        index: (int(match[1]), int(match[2]), match[3], match[4])
        for index, text in enumerate(lines)
        if (match := LINE.match(text))
    }
    nicks = {nick for (_, _, nick, _) in messages.values()}
    annotated = [index for index in messages if index >= ANNOTATED_FROM]
    own = Counter(messages[index][2] for index in annotated)
    replied_to = Counter(
        messages[parent][2]
        for index in annotated
        for parent in parents[index]
        if parent in messages and messages[parent][2] != messages[index][2]
    )
    players = sorted(nick for nick in nicks if own[nick] >= MIN_OWN_MESSAGES and replied_to[nick] >= MIN_REPLIES)
    for bot in players:
        rows = transcript(split, name, bot, messages, parents)
        path = out / f"{name}.{re.sub(r'[^A-Za-z0-9_-]', '_', bot)}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return len(players)


def reply_links(annotation: str) -> defaultdict[int, set[int]]:
    """For each line, the lines it replies to (a line linked to itself starts a conversation: no reply)."""
    parents: defaultdict[int, set[int]] = defaultdict(set)
    for row in annotation.split("\n"):
        if row.strip():
            parent, child = map(int, row.split()[:2])
            if parent != child:
                parents[child].add(parent)
    return parents


def transcript(
    split: str, name: str, bot: str, messages: dict[int, tuple[int, int, str, str]], parents: dict[int, set[int]]
) -> list[dict[str, Any]]:
    """The header and message rows of log `name` seen from the seat of `bot`."""
    day = name.split("_")[0].split(".")[0]
    by_lower = {nick.lower(): nick for (_, _, nick, _) in messages.values()}
    per_minute = Counter((hour, minute) for (hour, minute, _, _) in messages.values())
    seen: Counter[tuple[int, int]] = Counter()
    rows: list[dict[str, Any]] = [
        {
            "type": "meta",
            "source": f"irc-disentanglement {split} {name}",
            "channel_id": participant_id("#" + name),
            "bot_id": participant_id(bot),
            "bot_name": bot,
        }
    ]
    for index in sorted(messages):
        if index < ANNOTATED_FROM - CONTEXT_LINES:
            continue
        hour, minute, nick, content = messages[index]
        second = int(60 * seen[(hour, minute)] / per_minute[(hour, minute)])
        seen[(hour, minute)] += 1
        mentioned = sorted(
            {
                participant_id(by_lower[word.lower()])
                for word in NICK.findall(content)
                if word.lower() in by_lower and by_lower[word.lower()] != nick
            }
        )
        row: dict[str, Any] = {
            "type": "message",
            "id": index,
            "author_id": participant_id(nick),
            "author": nick,
            "is_bot": nick == bot,
            "content": content,
            "timestamp": f"{day}T{hour:02d}:{minute:02d}:{second:02d}+00:00",
            "mentions": mentioned,
            "reply_to": None,
        }
        if nick != bot:
            replies_to_bot = any(parent in messages and messages[parent][2] == bot for parent in parents[index])
            row["label"] = replies_to_bot if index >= ANNOTATED_FROM else None
        rows.append(row)
    return rows


def log_names(files: Iterable[str]) -> list[str]:
    """The logs that have both their text and their annotation among `files`."""
    names = set(files)
    return sorted(
        name.removesuffix(".annotation.txt")
        for name in names
        if name.endswith(".annotation.txt") and name.replace(".annotation.txt", ".ascii.txt") in names
    )


def local_reader(folder: Path) -> Reader:
    return lambda file_name: (folder / file_name).read_text(errors="replace")


def github_reader(split: str) -> Reader:
    def read(file_name: str) -> str:
        url = RAW_URL.format(repository=REPOSITORY, commit=COMMIT, split=split, name=file_name)
        return fetch(url).decode(errors="replace")

    return read


def github_files(split: str) -> list[str]:
    listing = json.loads(fetch(LISTING_URL.format(repository=REPOSITORY, split=split, commit=COMMIT)))
    return [entry["name"] for entry in listing]


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        body: bytes = response.read()
        return body


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Build labelled replay transcripts from the IRC disentanglement corpus (CC BY 4.0).",
        epilog="Score the result with: python -m eval.replay OUT_DIR",
    )
    parser.add_argument("out", type=Path, metavar="OUT_DIR", help="folder to write the *.jsonl transcripts to")
    parser.add_argument("--split", choices=["dev", "train", "test"], default="dev", help="the corpus split (dev)")
    parser.add_argument(
        "--source",
        type=Path,
        metavar="RAW_DIR",
        help="read <log>.ascii.txt and <log>.annotation.txt from this folder instead of downloading them",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.source is not None:
        if not args.source.is_dir():
            print(f"--source {args.source} is not a folder", file=sys.stderr)
            return 2
        names, read = log_names(path.name for path in args.source.iterdir()), local_reader(args.source)
    else:
        names, read = log_names(github_files(args.split)), github_reader(args.split)
    if not names:
        print("no <log>.ascii.txt with its <log>.annotation.txt found", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    total = sum(convert_log(args.split, name, read, args.out) for name in names)
    print(f"{total} transcripts from {len(names)} logs written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
