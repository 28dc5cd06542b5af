"""Train the learned follow-up tier's model (deciding/followup.py) and choose its thresholds.

    python -m eval.train_decider [--train DIR] [--dev DIR] [--out decider_model.json] [--folds [N]]

1. Replays every transcript of `--train` (built by `../shared/eval/make_transcripts.py`, git-ignored
   under data/) and of `--dev` through the bot's own decider, collecting the features of each
   message the follow-up rules decided after the bot spoke (the learned tier's candidates; the
   rules' "yes" among them, which the trees learn from although the bot scores only `followup_implicit`'s).
2. Fits gradient-boosted trees (log loss, histogram splits, no sampling: deterministic) on the train
   candidates only, then the lexicon: a logistic regression over the candidates' terms
   (`deciding.followup.lexical_terms`) whose offset is each candidate's trees' log-odds from trees fitted
   without its log (5 groups of logs), so the words learn what the trees leave unexplained.
3. On `--dev`: the `normal` threshold is the one with the best F1 of the whole decider among those
   with precision at least 0.83 (precision is what a member notices), `chatty`'s the best F2 (recall
   counts double: a chatty channel would rather answer), and the judge's band the widest around the
   threshold that puts at most 5 of every 100 labelled messages to the judge.
4. `--folds [N]` adds held-out figures over the train logs in N groups (5 unless given; the number of
   logs is leave-one-log-out): each group scored by trees and lexicon fitted on the others, at the
   dev-chosen threshold, against the rules alone on the same logs.

Writes the model as JSON (numbers rounded, so two runs write the same bytes) and prints the figures.
Needs numpy and scipy (dev dependencies); the bot scores the model in plain Python.

The trees' settings below were chosen on `--dev` (F1 within 0.002 of 100 trees at 0.1, for a fifth of
the scoring cost); deeper trees or more of them did not help.
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
import scipy.optimize

from conversation import Clock
from deciding.decider import ResponseDecider
from deciding.followup import (
    CANDIDATE_REASONS,
    FEATURES,
    LEXICAL,
    NO_LEXICON,
    SHIPPED_MODEL,
    LearnedModel,
    Lexicon,
    Node,
    Thresholds,
    logit,
    message_terms,
)
from eval.replay import ReplayError, build_decider, load_transcript, replay_transcript, transcript_paths
from records import MessageRecord

Matrix = npt.NDArray[np.float64]

TREES = 20
DEPTH = 3
LEARNING_RATE = 0.4
#: L2 penalty on a leaf's log-odds, and the least hessian (about p(1-p) summed) a leaf may hold.
LEAF_L2 = 1.0
MIN_LEAF_HESSIAN = 20.0
#: Distinct split points tried per feature (at its quantiles on the train candidates).
MAX_BINS = 32
#: The precision a member notices: the normal threshold is the F1-best among those that keep it.
MIN_PRECISION = 0.83
JUDGE_CALLS_PER_100 = 5.0
#: The lexicon: L2 penalty on each weight, the least candidates a term needs to be weighed, the terms kept
#: (largest weights first), and the groups of logs whose held-out trees give its offsets.
LEXICON_L2 = 10.0
LEXICON_MIN_COUNT = 3
LEXICON_TERMS = 2000
OFFSET_FOLDS = 5
LBFGS_STEPS = 300


@dataclass(slots=True)
class Collected:
    """Every labelled decision of a set of transcripts, and the learned tier's candidates among all lines."""

    logs: list[str]  # per labelled line: which channel log it comes from
    labels: list[bool]
    rule_respond: list[bool]  # the rules' decision
    candidate: list[int]  # per labelled line: its row in `features`, or -1
    features: list[list[float]]  # every candidate line, context lines included
    feature_labelled: list[bool]  # per feature row: whether the line is labelled
    terms: list[list[str]]  # per feature row: what the lexicon weighs
    feature_log: list[str]  # per feature row: its channel log


def _silent_model() -> LearnedModel:
    """A model that scores every candidate and answers none: the rules' own decisions, with features seen."""
    return LearnedModel(FEATURES, -30.0, (Node(0.0),), Thresholds(1.0, 1.0), 0.0, NO_LEXICON)


_YES_FEATURES = (FEATURES.index("rule_followup"), FEATURES.index("rule_followup_implicit"))


def _rule_said_yes(values: list[float]) -> bool:
    return any(values[index] > 0 for index in _YES_FEATURES)


_NAMED_FOLLOWUP = FEATURES.index("rule_followup")


def as_shipped(data: Collected, z: Matrix) -> Matrix:
    """Scores as the bot uses them: without `learned_veto` a `followup` "yes" is never scored, so it stands.

    (A `followup_implicit` "yes" is scored: the tier may turn it down.)
    """
    named_yes = np.array([values[_NAMED_FOLLOWUP] > 0 for values in data.features], dtype=bool)
    return np.where(named_yes, np.inf, z)


def collect(folder: Path) -> Collected:
    """Replay every transcript under `folder` with the rules alone, noting each candidate's features."""
    out = Collected([], [], [], [], [], [], [], [])
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

        def make_decider(clock: Clock, rows: dict[int, int] = rows, log: str = log) -> ResponseDecider:
            # The veto on: the follow-up rules' "yes" are candidates too, so the trees learn from them.
            decider = build_decider(clock, learned=_silent_model(), learned_veto=True)

            def note(message: MessageRecord, values: list[float], log: str = log) -> None:
                rows[message.message_id] = len(out.features)
                out.features.append(values)
                out.feature_labelled.append(False)
                reason = next(name for name, flag in zip(CANDIDATE_REASONS, values, strict=False) if flag)
                out.terms.append(message_terms(message.content, reason))
                out.feature_log.append(log)

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


def split_points(x: Matrix) -> list[Matrix]:
    """Per feature, the thresholds a split may use: between its distinct values, or its quantiles when many."""
    points = []
    for column in x.T:
        distinct = np.unique(column)
        if len(distinct) > MAX_BINS:
            quantiles = np.unique(np.quantile(column, np.linspace(0, 1, MAX_BINS + 1)[1:-1], method="lower"))
            after = distinct[np.minimum(np.searchsorted(distinct, quantiles, side="right"), len(distinct) - 1)]
            cuts = (quantiles + after) / 2
        else:
            cuts = (distinct[:-1] + distinct[1:]) / 2
        # Rounded as the file states them, so the bins below are exactly the file's comparisons.
        points.append(np.unique(np.round(cuts, 6)))
    return points


class Booster:
    """Gradient-boosted trees for log loss, on pre-binned features (a value <= a threshold goes left)."""

    def __init__(self, x: Matrix, y: Matrix) -> None:
        self.points = split_points(x)
        self.y = y
        self.features = x.shape[1]
        self.bins = max(len(p) for p in self.points) + 1
        binned = np.zeros(x.shape, dtype=np.int64)
        for j, cuts in enumerate(self.points):
            binned[:, j] = np.searchsorted(cuts, x[:, j], side="left")
        self.binned = binned
        self.flat = binned + np.arange(self.features) * self.bins
        # A split at bin b of feature j needs a threshold: bins past a feature's last one are not splits.
        self.usable = np.zeros((self.features, self.bins - 1), dtype=bool)
        for j, cuts in enumerate(self.points):
            self.usable[j, : len(cuts)] = True

    def fit(self) -> tuple[float, list[Node]]:
        y = self.y
        mean = min(max(float(y.mean()), 1e-6), 1 - 1e-6)
        base = round(math.log(mean / (1 - mean)), 6)
        z = np.full(len(y), base)
        trees = []
        for _ in range(TREES):
            p = 1 / (1 + np.exp(-z))
            tree, z_step = self._tree(np.arange(len(y)), p - y, p * (1 - p), 0)
            trees.append(tree)
            z = z + z_step
        return base, trees

    def _tree(self, rows: npt.NDArray[np.int64], g: Matrix, h: Matrix, depth: int) -> tuple[Node, Matrix]:
        """The subtree over `rows`, and every training row's log-odds step from it (zero outside `rows`)."""
        total_g, total_h = float(g[rows].sum()), float(h[rows].sum())
        value = round(-LEARNING_RATE * total_g / (total_h + LEAF_L2), 6)
        step = np.zeros(len(g))
        split = self._best_split(rows, g, h, total_g, total_h) if depth < DEPTH else None
        if split is None:
            step[rows] = value
            return Node(value), step
        feature, bin_ = split
        goes_left = self.binned[rows, feature] <= bin_
        left, left_step = self._tree(rows[goes_left], g, h, depth + 1)
        right, right_step = self._tree(rows[~goes_left], g, h, depth + 1)
        node = Node(value, feature, float(self.points[feature][bin_]), left, right)
        return node, left_step + right_step

    def _best_split(
        self, rows: npt.NDArray[np.int64], g: Matrix, h: Matrix, total_g: float, total_h: float
    ) -> tuple[int, int] | None:
        if total_h < 2 * MIN_LEAF_HESSIAN:
            return None
        flat = self.flat[rows].ravel()
        size = self.features * self.bins
        g_bins = np.bincount(flat, np.repeat(g[rows], self.features), size).reshape(self.features, self.bins)
        h_bins = np.bincount(flat, np.repeat(h[rows], self.features), size).reshape(self.features, self.bins)
        g_left = np.cumsum(g_bins, axis=1)[:, :-1]
        h_left = np.cumsum(h_bins, axis=1)[:, :-1]
        g_right, h_right = total_g - g_left, total_h - h_left
        gain = g_left**2 / (h_left + LEAF_L2) + g_right**2 / (h_right + LEAF_L2) - total_g**2 / (total_h + LEAF_L2)
        allowed = self.usable & (h_left >= MIN_LEAF_HESSIAN) & (h_right >= MIN_LEAF_HESSIAN)
        gain = np.where(allowed, gain, -np.inf)
        best = int(np.argmax(gain))  # the first of equals: deterministic
        if not gain.flat[best] > 1e-9:
            return None
        feature, bin_ = divmod(best, self.bins - 1)
        return feature, bin_


def fit(x: Matrix, y: Matrix) -> LearnedModel:
    """Trees fitted on `x`, `y`; thresholds and band are the caller's (placeholders here)."""
    base, trees = Booster(x, y).fit()
    return LearnedModel(FEATURES, base, tuple(trees), Thresholds(0.5, 0.5), 0.0)


def logits(model: LearnedModel, x: Matrix) -> Matrix:
    """The model's log-odds for every row of `x`, vectorised (the bot's walk, one tree at a time for all rows)."""
    z = model.base + x[:, LEXICAL]
    for tree in model.trees:
        z += _tree_logits(tree, x, np.arange(len(x)))
    return z


def _tree_logits(node: Node, x: Matrix, rows: npt.NDArray[np.int64]) -> Matrix:
    out = np.zeros(len(x))
    if node.feature is None or node.left is None or node.right is None:
        out[rows] = node.value
        return out
    goes_left = x[rows, node.feature] <= node.threshold
    return _tree_logits(node.left, x, rows[goes_left]) + _tree_logits(node.right, x, rows[~goes_left])


def fit_lexicon(terms: Sequence[Sequence[str]], y: Matrix, offset: Matrix) -> Lexicon:
    """A logistic regression over the rows' terms (present or not) on top of `offset` log-odds, L2-penalised.

    Terms of fewer than `LEXICON_MIN_COUNT` rows are left out, and only the `LEXICON_TERMS` largest weights
    kept, rounded to 3 decimals: a vocabulary and weights that follow from the data alone.
    """
    counts: dict[str, int] = defaultdict(int)
    for row_terms in terms:
        for term in set(row_terms):
            counts[term] += 1
    vocabulary = sorted(term for term, count in counts.items() if count >= LEXICON_MIN_COUNT)
    index = {term: i for i, term in enumerate(vocabulary)}
    rows_list, columns_list = [], []
    for row, row_terms in enumerate(terms):
        for column in sorted({index[term] for term in row_terms if term in index}):
            rows_list.append(row)
            columns_list.append(column)
    rows, columns = np.array(rows_list, dtype=np.int64), np.array(columns_list, dtype=np.int64)
    size = len(vocabulary)

    def loss_and_gradient(w: Matrix) -> tuple[float, Matrix]:
        weights = w[1:]
        z = offset + w[0] + np.bincount(rows, weights[columns], len(y))
        residual = 1 / (1 + np.exp(-np.clip(z, -30, 30))) - y
        loss = float(np.sum(np.logaddexp(0, z) - y * z)) + 0.5 * LEXICON_L2 * float(w @ w)
        gradient = np.concatenate([[residual.sum()], np.bincount(columns, residual[rows], size)]) + LEXICON_L2 * w
        return loss, gradient

    fitted = scipy.optimize.minimize(
        loss_and_gradient,
        np.zeros(size + 1),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": LBFGS_STEPS, "gtol": 1e-6},
    )
    w = fitted.x
    ranked = sorted(range(size), key=lambda i: (-abs(w[i + 1]), vocabulary[i]))[:LEXICON_TERMS]
    weights = {vocabulary[i]: round(float(w[i + 1]), 3) for i in ranked}
    return Lexicon(round(float(w[0]), 3), {term: weight for term, weight in sorted(weights.items()) if weight})


def with_lexical(x: Matrix, lexicon: Lexicon, terms: Sequence[Sequence[str]]) -> Matrix:
    """`x` with its `lexical` column as the bot computes it with `lexicon`."""
    out = x.copy()
    out[:, LEXICAL] = [lexicon.logit(row_terms) for row_terms in terms]
    return out


def fit_with_lexicon(
    x: Matrix, y: Matrix, terms: Sequence[Sequence[str]], groups: npt.NDArray[np.int64]
) -> LearnedModel:
    """Trees on `x`, then the lexicon on the trees' log-odds of each row from trees fitted without its group."""
    offset = np.zeros(len(y))
    # With one group there are no held-out trees: the lexicon then fits the words alone.
    for group in np.unique(groups) if len(np.unique(groups)) > 1 else []:
        inside = groups == group
        offset[inside] = logits(fit(x[~inside], y[~inside]), x[inside])
    trees = fit(x, y)
    return LearnedModel(FEATURES, trees.base, trees.trees, trees.thresholds, 0.0, fit_lexicon(terms, y, offset))


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


def best_threshold(data: Collected, z: Matrix, beta: float, min_precision: float = 0.0) -> float:
    """The log-odds threshold with the best F-beta of the whole decider among those keeping `min_precision`.

    The lowest of equals (deterministic); when no threshold keeps the precision, the best of all.
    """
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
    anyway, anyway_value = math.inf, -1.0
    tp, fp = fixed_tp, fixed_fp
    for index, (value, label) in enumerate(scored):
        tp += label
        fp += not label
        if index + 1 < len(scored) and scored[index + 1][0] == value:
            continue
        scores = _scores(tp, fp, positives - tp)
        quality = scores.f_beta(beta)
        if quality > anyway_value:
            anyway, anyway_value = value, quality
        if scores.precision >= min_precision and quality > best_value:
            best, best_value = value, quality
    return best if best_value >= 0 else anyway


def judge_band(z_all: Matrix, threshold: float, labelled: int) -> float:
    """The widest half-width (log-odds) around `threshold` holding at most 5 judge calls per 100 labelled lines."""
    allowed = int(JUDGE_CALLS_PER_100 * labelled / 100)
    distances = np.sort(np.abs(z_all[np.isfinite(z_all)] - threshold))
    if allowed >= len(distances):
        return float(distances[-1]) + 1.0
    # The bot asks about scores strictly inside the band: at most `allowed` of them, ties at the edge left out.
    return float(distances[allowed])


def log_groups(logs: Sequence[str], count: int) -> npt.NDArray[np.int64]:
    """Each row's group of logs: the logs in name order dealt round `count` groups."""
    order = {log: i % count for i, log in enumerate(sorted(set(logs)))}
    return np.array([order[log] for log in logs], dtype=np.int64)


def held_out(train: Collected, x: Matrix, y: Matrix, threshold: float, count: int) -> str:
    """The train logs in `count` groups, each scored by trees and lexicon fitted on the others: gains over the rules."""
    logs = sorted(set(train.logs))
    count = min(count, len(logs))
    labelled = np.array(train.feature_labelled)
    groups = log_groups(train.feature_log, count)
    held_out_z = np.zeros(len(train.features))
    for group in range(count):
        inside = groups == group
        fitting = labelled & ~inside
        terms = [train.terms[row] for row in np.flatnonzero(fitting)]
        model = fit_with_lexicon(
            x[fitting],
            y[fitting],
            terms,
            log_groups([train.feature_log[row] for row in np.flatnonzero(fitting)], OFFSET_FOLDS),
        )
        scored = np.flatnonzero(inside)
        x_scored = with_lexical(x[scored], model.lexicon, [train.terms[row] for row in scored])
        held_out_z[scored] = logits(model, x_scored)
    held_out_z = as_shipped(train, held_out_z)
    rows_by_log: dict[str, list[int]] = defaultdict(list)
    for i, log in enumerate(train.logs):
        rows_by_log[log].append(i)
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
    how = "leave-one-log-out" if count == len(logs) else f"{count} groups of logs held out in turn"
    return "\n".join(
        [
            f"{how} over {len(logs)} train logs (threshold {threshold:+.3f} log-odds):",
            f"  pooled: rules P {pooled_rules.precision:.3f} R {pooled_rules.recall:.3f} F1 {pooled_rules.f1:.4f}"
            f" -> learned P {pooled.precision:.3f} R {pooled.recall:.3f} F1 {pooled.f1:.4f}",
            f"  per-log F1 gain: mean {gains_array.mean():+.3f}, median {float(np.median(gains_array)):+.3f},"
            f" improved {int((gains_array > 1e-12).sum())}, unchanged {int((np.abs(gains_array) <= 1e-12).sum())},"
            f" worse {int((gains_array < -1e-12).sum())}; worst {worst[0]} {worst[1]:+.3f}",
        ]
    )


def _splits(model: LearnedModel) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    stack = list(model.trees)
    while stack:
        node = stack.pop()
        if node.feature is not None and node.left is not None and node.right is not None:
            counts[FEATURES[node.feature]] += 1
            stack += [node.left, node.right]
    return counts


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m eval.train_decider", description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=Path("data/irc-train-transcripts"))
    parser.add_argument("--dev", type=Path, default=Path("../shared/eval/irc-dev"))
    parser.add_argument("--out", type=Path, default=SHIPPED_MODEL)
    # For trying changes to the fit: the replays' features, kept between runs (pickle, so only a file you wrote).
    parser.add_argument("--cache", type=Path, help="keep the collected features in this file and reuse them")
    parser.add_argument(
        "--folds",
        type=int,
        nargs="?",
        const=5,
        default=0,
        help="add held-out figures over the train logs in this many groups (5; the number of logs: one log each)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
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
    rows = np.flatnonzero(labelled)
    fitted = fit_with_lexicon(
        x[rows],
        y[rows],
        [train.terms[row] for row in rows],
        log_groups([train.feature_log[row] for row in rows], OFFSET_FOLDS),
    )
    # The file's numbers are rounded as they are made, so the thresholds are chosen for the model as stated.
    x_dev = with_lexical(np.array(dev.features, dtype=np.float64), fitted.lexicon, dev.terms)
    z_dev = as_shipped(dev, logits(fitted, x_dev))
    normal = best_threshold(dev, z_dev, 1.0, MIN_PRECISION)
    chatty = min(best_threshold(dev, z_dev, 2.0), normal)
    thresholds = Thresholds(round(1 / (1 + math.exp(-normal)), 6), round(1 / (1 + math.exp(-chatty)), 6))
    # Around the threshold as the bot reads it back, and rounded down: a band rounded up could take in a tie.
    band = math.floor(judge_band(z_dev, logit(thresholds.normal), len(dev.labels)) * 1e6) / 1e6
    shipped = LearnedModel(FEATURES, fitted.base, fitted.trees, thresholds, band, fitted.lexicon)
    args.out.write_text(json.dumps(shipped.to_json(), indent=1) + "\n", encoding="utf-8")

    threshold = logit(shipped.thresholds.normal)
    rules, learned = evaluate(dev, None, threshold), evaluate(dev, z_dev, threshold)
    print(f"train: {len(train.labels)} labelled lines, {int(labelled.sum())} candidates, {int(y.sum())} positive")
    print(f"dev rules:   P {rules.precision:.3f} R {rules.recall:.3f} F1 {rules.f1:.3f}")
    print(f"dev learned: P {learned.precision:.3f} R {learned.recall:.3f} F1 {learned.f1:.3f}")
    print(f"thresholds: normal {shipped.thresholds.normal}, chatty {shipped.thresholds.chatty}; band ±{band:.3f}")
    print("splits per feature:")
    for name, count in sorted(_splits(shipped).items(), key=lambda item: (-item[1], item[0])):
        print(f"  {name:<36} {count}")
    print(f"lexicon: {len(shipped.lexicon.weights)} terms, bias {shipped.lexicon.bias:+.3f}")
    if args.folds:
        print(held_out(train, x, y, threshold, args.folds))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
