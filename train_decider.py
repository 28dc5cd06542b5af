"""Train the learned follow-up tier's model (followup.py) and choose its thresholds.

    python train_decider.py [--train DIR] [--dev DIR] [--out decider_model.json] [--folds]

1. Replays every transcript of `--train` (built by `../shared/eval/make_transcripts.py`, git-ignored
   under data/) and of `--dev` through the bot's own decider, collecting the features of each
   message the follow-up rules turned down after the bot spoke (the learned tier's candidates).
2. Fits a logistic regression (L2, Newton's method: deterministic) on the train candidates only.
3. On `--dev`: the `normal` threshold is the one with the best F1 of the whole decider, `chatty`'s the
   best F2 (recall counts double: a chatty channel would rather answer), and the judge's band the
   widest around the threshold that puts at most 5 of every 100 labelled messages to the judge.
4. `--folds` adds leave-one-log-out over the train logs: each log scored by a model fitted on the
   others, at the dev-chosen threshold, against the rules alone on the same log.

Writes the model as JSON (numbers rounded, so two runs write the same bytes) and prints the figures.
Needs numpy (a dev dependency); the bot scores the model in plain Python.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import pickle
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from conversation import Clock, MessageRecord, ResponseDecider
from followup import FEATURES, SHIPPED_MODEL, LearnedModel, Thresholds, logit
from replay import ReplayError, build_decider, load_transcript, replay_transcript, transcript_paths

Matrix = npt.NDArray[np.float64]

#: Strength of the L2 penalty on the standardised weights (per training message).
L2 = 1e-4
JUDGE_CALLS_PER_100 = 5.0
NEWTON_STEPS = 15


@dataclass(slots=True)
class Collected:
    """Every labelled decision of a set of transcripts, and the learned tier's candidates among all lines."""

    logs: list[str]  # per labelled line: which channel log it comes from
    labels: list[bool]
    rule_respond: list[bool]  # the rules' decision
    candidate: list[int]  # per labelled line: its row in `features`, or -1
    features: list[list[float]]  # every candidate line, context lines included
    feature_labelled: list[bool]  # per feature row: whether the line is labelled


def _silent_model() -> LearnedModel:
    """A model that scores every candidate and answers none: the rules' own decisions, with features seen."""
    count = len(FEATURES)
    return LearnedModel(FEATURES, (0.0,) * count, (1.0,) * count, (0.0,) * count, -30.0, Thresholds(1.0, 1.0), 0.0)


_YES_FEATURES = (FEATURES.index("rule_followup"), FEATURES.index("rule_followup_implicit"))


def _rule_said_yes(values: list[float]) -> bool:
    return any(values[index] > 0 for index in _YES_FEATURES)


def collect(folder: Path) -> Collected:
    """Replay every transcript under `folder` with the rules alone, noting each candidate's features."""
    out = Collected([], [], [], [], [], [])
    for path in transcript_paths([folder]):
        try:
            transcript = load_transcript(path)
        except ReplayError as error:
            # make_transcripts.py marks a nick's lines as the bot's case-sensitively: a few files disagree with
            # themselves. Leaving them out loses little and keeps the replay's checks strict.
            print(f"skipped: {error}", file=sys.stderr)
            continue
        log = path.name.rsplit(".", 2)[0]  # "2005-02-06.train-c" of "2005-02-06.train-c.nick.jsonl"
        rows: dict[int, int] = {}

        def make_decider(clock: Clock, rows: dict[int, int] = rows) -> ResponseDecider:
            decider = build_decider(clock, learned=_silent_model())

            def note(message: MessageRecord, values: list[float]) -> None:
                rows[message.message_id] = len(out.features)
                out.features.append(values)
                out.feature_labelled.append(False)

            decider.on_features = note
            return decider

        for decision in asyncio.run(replay_transcript(transcript, make_decider=make_decider)):
            if decision.label is None:
                continue
            row = rows.get(decision.message_id, -1)
            if row >= 0:
                out.feature_labelled[row] = True
            out.logs.append(log)
            out.labels.append(decision.label)
            # The silent model turned every candidate down: a candidate's rule decision is in its features.
            out.rule_respond.append(decision.respond if row < 0 else _rule_said_yes(out.features[row]))
            out.candidate.append(row)
    return out


def fit(x: Matrix, y: Matrix) -> tuple[Matrix, Matrix, Matrix, float]:
    """Means, scales, standardised weights and bias of an L2 logistic regression (Newton's method)."""
    means = x.mean(axis=0)
    scales = x.std(axis=0)
    scales[scales == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - means) / scales])
    beta = np.zeros(z.shape[1])
    penalty = L2 * len(x) * np.eye(z.shape[1])
    penalty[0, 0] = 0.0  # the bias is not shrunk
    for _ in range(NEWTON_STEPS):
        p = 1 / (1 + np.exp(-(z @ beta)))
        gradient = z.T @ (p - y) + penalty @ beta
        hessian = (z * (p * (1 - p))[:, None]).T @ z + penalty
        beta = beta - np.linalg.solve(hessian, gradient)
    return means, scales, beta[1:], float(beta[0])


def logits(model: tuple[Matrix, Matrix, Matrix, float], x: Matrix) -> Matrix:
    means, scales, weights, bias = model
    return bias + ((x - means) / scales) @ weights


@dataclass(frozen=True, slots=True)
class Scores:
    precision: float
    recall: float
    f1: float
    tp: int
    fp: int
    fn: int

    def f_beta(self, beta: float) -> float:
        b2 = beta * beta
        denominator = b2 * self.precision + self.recall
        return (1 + b2) * self.precision * self.recall / denominator if denominator else 0.0


def _scores(tp: int, fp: int, fn: int) -> Scores:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Scores(precision, recall, f1, tp, fp, fn)


def evaluate(data: Collected, z: Matrix | None, threshold: float, rows: Sequence[int] | None = None) -> Scores:
    """The whole decider's scores on `data`'s labelled lines (`rows` of them): the rules, and the tier where scored."""
    tp = fp = fn = 0
    for i in range(len(data.labels)) if rows is None else rows:
        row = data.candidate[i]
        respond = data.rule_respond[i] if row < 0 or z is None else bool(z[row] >= threshold)
        label = data.labels[i]
        tp += respond and label
        fp += respond and not label
        fn += label and not respond
    return _scores(tp, fp, fn)


def best_threshold(data: Collected, z: Matrix, beta: float) -> float:
    """The log-odds threshold with the best F-beta of the whole decider (the lowest of equals: deterministic)."""
    fixed_tp = fixed_fp = positives = 0
    scored: list[tuple[float, bool]] = []
    for i, label in enumerate(data.labels):
        positives += label
        row = data.candidate[i]
        if row < 0:
            fixed_tp += data.rule_respond[i] and label
            fixed_fp += data.rule_respond[i] and not label
        else:
            scored.append((float(z[row]), label))
    scored.sort(key=lambda item: -item[0])
    best, best_value = math.inf, -1.0
    tp, fp = fixed_tp, fixed_fp
    for index, (value, label) in enumerate(scored):
        tp += label
        fp += not label
        if index + 1 < len(scored) and scored[index + 1][0] == value:
            continue
        quality = _scores(tp, fp, positives - tp).f_beta(beta)
        if quality > best_value:
            best, best_value = value, quality
    return best


def judge_band(z_all: Matrix, threshold: float, labelled: int) -> float:
    """The widest half-width (log-odds) around `threshold` holding at most 5 judge calls per 100 labelled lines."""
    allowed = int(JUDGE_CALLS_PER_100 * labelled / 100)
    distances = np.sort(np.abs(z_all - threshold))
    if allowed >= len(distances):
        return float(distances[-1]) + 1.0
    # Strictly inside the band, one call to spare: the bot's float sums may round the edge case either way.
    return float(distances[allowed - 1]) if allowed > 0 else 0.0


def _round(values: Sequence[float] | Matrix) -> tuple[float, ...]:
    return tuple(round(float(v), 6) for v in values)


def leave_one_log_out(train: Collected, x: Matrix, y: Matrix, threshold: float) -> str:
    """Each train log scored by a model fitted on the other logs: pooled and per-log gains over the rules."""
    logs = sorted(set(train.logs))
    feature_log = ["" for _ in train.features]
    for i, row in enumerate(train.candidate):
        if row >= 0:
            feature_log[row] = train.logs[i]
    # Candidates of context lines have no labelled row; they belong to no log's training set.
    rows_by_log: dict[str, list[int]] = defaultdict(list)
    for i, log in enumerate(train.logs):
        rows_by_log[log].append(i)
    held_out_z = np.zeros(len(train.features))
    names = np.array(feature_log)
    labelled = np.array(train.feature_labelled)
    for log in logs:
        inside = names == log
        model = fit(x[labelled & ~inside], y[labelled & ~inside])
        held_out_z[inside] = logits(model, x[inside])
    gains: list[float] = []
    worst = ("", math.inf)
    for log in logs:
        rules = evaluate(train, None, threshold, rows_by_log[log])
        learned = evaluate(train, held_out_z, threshold, rows_by_log[log])
        gain = learned.f1 - rules.f1
        gains.append(gain)
        if gain < worst[1]:
            worst = (log, gain)
    pooled_rules = evaluate(train, None, threshold)
    pooled = evaluate(train, held_out_z, threshold)
    gains_array = np.array(gains)
    return "\n".join(
        [
            f"leave-one-log-out over {len(logs)} train logs (threshold {threshold:+.3f} log-odds):",
            f"  pooled: rules P {pooled_rules.precision:.3f} R {pooled_rules.recall:.3f} F1 {pooled_rules.f1:.3f}"
            f" -> learned P {pooled.precision:.3f} R {pooled.recall:.3f} F1 {pooled.f1:.3f}",
            f"  per-log F1 gain: mean {gains_array.mean():+.3f}, median {float(np.median(gains_array)):+.3f},"
            f" improved {int((gains_array > 0).sum())}, unchanged {int((gains_array == 0).sum())},"
            f" worse {int((gains_array < 0).sum())}; worst {worst[0]} {worst[1]:+.3f}",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="train_decider.py", description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=Path("data/irc-train-transcripts"))
    parser.add_argument("--dev", type=Path, default=Path("../shared/eval/irc-dev"))
    parser.add_argument("--out", type=Path, default=SHIPPED_MODEL)
    # For trying changes to the fit: the replays' features, kept between runs (pickle, so only a file you wrote).
    parser.add_argument("--cache", type=Path, help="keep the collected features in this file and reuse them")
    parser.add_argument("--folds", action="store_true", help="add leave-one-log-out over the train logs")
    args = parser.parse_args(argv)

    if args.cache is not None and args.cache.exists():
        train, dev = pickle.loads(args.cache.read_bytes())
    else:
        train, dev = collect(args.train), collect(args.dev)
        if args.cache is not None:
            args.cache.write_bytes(pickle.dumps((train, dev)))
    x = np.array(train.features, dtype=np.float64)
    y = np.array([0.0] * len(train.features))
    for i, row in enumerate(train.candidate):
        if row >= 0:
            y[row] = float(train.labels[i])
    labelled = np.array(train.feature_labelled)
    model = fit(x[labelled], y[labelled])
    means, scales, weights, bias = model
    # Round first, so the thresholds are chosen for the model exactly as the file states it.
    rounded = (np.array(_round(means)), np.array(_round(scales)), np.array(_round(weights)), round(bias, 6))
    z_dev = logits(rounded, np.array(dev.features, dtype=np.float64))
    normal = best_threshold(dev, z_dev, 1.0)
    chatty = min(best_threshold(dev, z_dev, 2.0), normal)
    band = judge_band(z_dev, normal, len(dev.labels))
    shipped = LearnedModel(
        FEATURES,
        tuple(rounded[0]),
        tuple(rounded[1]),
        tuple(rounded[2]),
        rounded[3],
        Thresholds(round(1 / (1 + math.exp(-normal)), 6), round(1 / (1 + math.exp(-chatty)), 6)),
        round(band, 6),
    )
    args.out.write_text(json.dumps(shipped.to_json(), indent=2) + "\n", encoding="utf-8")

    threshold = logit(shipped.thresholds.normal)
    rules, learned = evaluate(dev, None, threshold), evaluate(dev, z_dev, threshold)
    print(f"train: {len(train.labels)} labelled lines, {int(labelled.sum())} candidates, {int(y.sum())} positive")
    print(f"dev rules:   P {rules.precision:.3f} R {rules.recall:.3f} F1 {rules.f1:.3f}")
    print(f"dev learned: P {learned.precision:.3f} R {learned.recall:.3f} F1 {learned.f1:.3f}")
    print(f"thresholds: normal {shipped.thresholds.normal}, chatty {shipped.thresholds.chatty}; band ±{band:.3f}")
    print("weights (standardised):")
    for name, weight in sorted(zip(FEATURES, shipped.weights, strict=True), key=lambda item: -abs(item[1])):
        print(f"  {name:<36} {weight:+.3f}")
    if args.folds:
        print(leave_one_log_out(train, x, y, threshold))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
