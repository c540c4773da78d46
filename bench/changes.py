"""The change rule (runs/changes/detect.py) on the real Liger CI history, without a database:
how many changes of each kind it reports, per kernel, how many steps later come back, the
groups of cells that moved together, and its agreement with Apache Otava itself (apache-otava,
the `test` extra) run with its command-line defaults on every cell: the change points both
find, each alone and why; and issue 44's two figures: (a) otava's changes of >= 10 % found as
lasting steps, each miss in a class, and (b) the index's lasting steps confirmed by otava or in
a named class. docs/changes.md quotes its output.

Cells are the ones the site follows (runs.querysets.RunQuerySet.history_of): kernel, timed pass,
metric, provider, workload, GPU and the sweep the row belongs to; its points in the order the
run page draws them (observed time, then the publication's commits.txt position); a cell
measured twice in one CI run counts once, at the median.

    python bench/changes.py [data/liger-ci] [--all]

--all lists every one of otava's changes that (a) counts as missed, not three a class.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")

import django  # noqa: E402

django.setup()

from runs.changes import detect  # noqa: E402
from runs.reference.catalogue import workload_slug  # noqa: E402
from runs.sources.parsers import parse_liger_csv  # noqa: E402

SOURCE = "liger-kernel-ci"
# A step "comes back" when the median of the next COMEBACK points after it lies within the
# step's threshold of the level it left.
COMEBACK = 3


def ordered_folders(root: Path) -> list[str]:
    folders = sorted(p.parent.name for p in root.glob("*/benchmark.csv"))
    listed = (root / "commits.txt").read_text().split() if (root / "commits.txt").exists() else []
    return [f for f in listed if f in folders] + [f for f in folders if f not in listed]


def histories(root: Path) -> tuple[list[str], dict[tuple, dict[int, float]]]:
    folders = ordered_folders(root)
    per: dict[tuple, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    first_seen: dict[tuple, dict[int, object]] = defaultdict(dict)
    for seq, folder in enumerate(folders):
        for row in parse_liger_csv((root / folder / "benchmark.csv").read_bytes(), folder):
            cell = (row.benchmark, row.timed_pass, row.metric, row.provider,
                    workload_slug(row.params), row.gpu_name, row.sweep_name)  # fmt: skip
            per[cell][seq].append(row.median)
            seen = first_seen[cell].get(seq)
            first_seen[cell][seq] = row.observed_at if seen is None else min(seen, row.observed_at)
    return folders, {
        cell: {
            seq: statistics.median(points[seq])
            for seq in sorted(points, key=lambda q, c=cell: (first_seen[c][q], q))
        }
        for cell, points in per.items()
    }


def otava_points(values: list[float]) -> list:
    """Apache Otava's change points with its command-line defaults (otava.series.AnalysisOptions:
    window 50, p-value 0.001, magnitude 0), as `otava analyze` computes them per metric."""
    from otava.analysis import compute_change_points
    from otava.series import AnalysisOptions

    options = AnalysisOptions()
    points, _ = compute_change_points(
        list(values), window_len=options.window_len, max_pvalue=options.max_pvalue,
        min_magnitude=options.min_magnitude,
    )  # fmt: skip
    return points


OTAVA_PVALUE = 0.001


def otava_ttest(values: list[float], verdict: detect.Verdict, index: int) -> float:
    """otava's t-test (TTestSignificanceTester) of a step's two levels: the up to 8 points
    before it since the previous step, outliers and transients left out, against the points
    from it to the next step."""
    from otava.analysis import TTestSignificanceTester

    off = set()
    for ch in verdict.changes:
        if ch.kind in (detect.OUTLIER, detect.TRANSIENT):
            off.update(range(ch.index, (ch.until if ch.until is not None else ch.index) + 1))
    steps = sorted(ch.index for ch in verdict.changes if ch.kind == detect.STEP)
    start = max([s for s in steps if s < index], default=0)
    end = min([s for s in steps if s > index], default=len(values))
    left = [values[j] for j in range(start, index) if j not in off][-detect.WINDOW :]
    right = [values[j] for j in range(index, end) if j not in off]
    if not left or not right:
        return 1.0
    return TTestSignificanceTester(OTAVA_PVALUE).compare(left, right).pvalue


def _reason(verdict: detect.Verdict, index: int) -> str:
    """Why the index reports no lasting step at an Otava change point (the closing note)."""
    if verdict.status == detect.NOISY:
        return "noisy cell"
    for ch in verdict.changes:
        if ch.index == index:
            return ch.kind
        if ch.kind == detect.TRANSIENT and ch.until + 1 == index:
            return "transient's return"
        if ch.kind == detect.OUTLIER and ch.index + 1 == index:
            return "outlier's return"
    return "within the threshold"


def main(argv: list[str]) -> int:
    every = "--all" in argv
    paths = [a for a in argv[1:] if a != "--all"]
    root = Path(paths[0]) if paths else ROOT / "data" / "liger-ci"
    folders, cells = histories(root)
    status = Counter()
    kinds = Counter()
    per_kernel: dict[str, Counter] = defaultdict(Counter)
    at: dict[tuple, list[str]] = defaultdict(list)  # (publication, kind, direction) -> kernels
    moves: dict[tuple, list[tuple[str, float]]] = defaultdict(list)  # ... -> (provider, shift)
    spans: dict[tuple, Counter] = defaultdict(Counter)  # transient groups -> last publications
    covered: dict[tuple, Counter] = defaultdict(Counter)  # excursions -> publications
    verdicts: dict[tuple, detect.Verdict] = {}
    comebacks = points = early = 0
    elapsed = 0.0
    for cell, history in cells.items():
        seqs, values = list(history), list(history.values())
        points += len(values)
        started = time.perf_counter()
        verdict = detect.detect(values, metric=cell[2])
        elapsed += time.perf_counter() - started
        verdicts[cell] = verdict
        status[verdict.status] += 1
        for ch in verdict.changes:
            kinds[ch.kind, ch.direction] += 1
            per_kernel[cell[0]][ch.kind, ch.direction] += 1
            key = folders[seqs[ch.index]], ch.kind, ch.direction
            at[key].append(cell[0])
            moves[key].append((cell[3], ch.shift))
            if ch.kind == detect.TRANSIENT:
                spans[key][folders[seqs[ch.until]]] += 1
            if ch.kind in (detect.OUTLIER, detect.TRANSIENT):
                last = ch.until if ch.until is not None else ch.index
                covered[key].update(folders[seqs[j]] for j in range(ch.index, last + 1))
            if ch.kind == detect.STEP:
                early += ch.index < 4
                after = values[ch.index + 1 : ch.index + 1 + COMEBACK]
                level = statistics.median(after) if after else ch.after
                if abs(level - ch.before) / ch.before <= ch.threshold:
                    comebacks += 1
    grouped = {k: v for k, v in at.items() if detect.grouped(v)}
    # The host's large excursions: the grouped outliers and transients of at least
    # HOST_EXCURSION_CELLS cells, each over the publications that most of its cells were off.
    host = {
        pub
        for key, kernels in grouped.items()
        if key[1] != detect.STEP and len(kernels) >= HOST_EXCURSION_CELLS
        for pub, n in covered[key].items()
        if 2 * n >= len(kernels)
    }
    # Every excursion of the host, as the rule's grouping finds one (>= GROUP_MIN_CELLS cells
    # of >= GROUP_MIN_KERNELS kernels off together and back), the large ones and the small.
    phases = {
        pub
        for key, kernels in grouped.items()
        if key[1] != detect.STEP
        for pub, n in covered[key].items()
        if 2 * n >= len(kernels)
    }
    agreement = _agreement(folders, cells, verdicts, host, phases)
    print(f"{len(folders)} publications, {len(cells)} cells, {points} points under {root.name}")
    print(
        f"cells: {status[detect.JUDGED]} judged, {status[detect.NOISY]} too noisy to judge, "
        f"{status[detect.SHORT]} with too few points (the rule: {elapsed:.1f} s for all cells)"
    )

    def both(kind: str) -> int:
        return kinds[kind, detect.REGRESSION] + kinds[kind, detect.IMPROVEMENT]

    print(f"changes: {sum(kinds.values())}")
    print(f"  lasting steps: {both(detect.STEP)} ({kinds[detect.STEP, detect.REGRESSION]} "
          f"regressions, {kinds[detect.STEP, detect.IMPROVEMENT]} improvements); "
          f"{early} of them at publications 2-4")  # fmt: skip
    print(f"  transients (back within {detect.TRANSIENT_MAX} publications, reported once): "
          f"{both(detect.TRANSIENT)}")  # fmt: skip
    print(f"  outliers (one publication off, back at the next; not reported): "
          f"{both(detect.OUTLIER)}")  # fmt: skip
    print(f"  pending (last publication, not yet settled): {both(detect.PENDING)}")
    print(f"  steps whose next {COMEBACK} points came back to the old level: {comebacks}")
    in_groups = sum(len(v) for k, v in grouped.items() if k[1] == detect.STEP)
    print(f"  steps inside a group (moved with >= {detect.GROUP_MIN_CELLS} cells of >= "
          f"{detect.GROUP_MIN_KERNELS} kernels at one publication): {in_groups}")  # fmt: skip
    print()
    print(f"the host's excursions (grouped outliers and transients): {', '.join(sorted(phases))}")
    _print_agreement(agreement, host, every=every)
    print()
    print("groups (publication, kind, direction: cells of kernels, median shift, cells of")
    print("providers other than Liger's, whose code does not change with Liger's commits)")
    for key, kernels in sorted(grouped.items(), key=lambda kv: -len(kv[1])):
        pub, kind, direction = key
        shift = statistics.median(m for _, m in moves[key])
        others = sum(not p.startswith("liger") for p, _ in moves[key])
        span = ""
        if kind == detect.TRANSIENT:
            span = "  until " + ", ".join(f"{u} ({n})" for u, n in spans[key].most_common())
        print(f"  {pub:16} {kind:9} {direction:12} {len(kernels):5} cells of "
              f"{len(set(kernels)):3} kernels  {shift:+7.1%}  {others:4} not Liger's{span}")  # fmt: skip
    print()
    print(f"{'kernel':36} {'step+':>6} {'step-':>6} {'transient':>9} {'outlier':>8} {'pending':>8}")
    for kernel, c in sorted(per_kernel.items()):

        def of(kind: str, c=c) -> int:
            return c[kind, detect.REGRESSION] + c[kind, detect.IMPROVEMENT]

        print(
            f"{kernel:36} {c[detect.STEP, detect.REGRESSION]:>6} "
            f"{c[detect.STEP, detect.IMPROVEMENT]:>6} {of(detect.TRANSIENT):>9} "
            f"{of(detect.OUTLIER):>8} {of(detect.PENDING):>8}"
        )
    return 0


# A group of excursions this large moved the whole suite (4444fdf and 7644a0f-v0.7.0 through
# 9c1ddb7 on data/liger-ci), not a few kernels: an otava segment that holds one of them has
# its mean, and often its median, carried by it.
HOST_EXCURSION_CELLS = 100

# Otava's first pass keeps a split at ten times its p-value (otava.analysis.split); the merge
# then drops it above OTAVA_PVALUE. A step that only this level confirms is weaker evidence,
# named as its own class.
OTAVA_FIRST_PASS = 0.01


def _agreement(folders, cells, verdicts, host, phases) -> dict:
    """The rule's lasting steps against apache-otava's change points, cell by cell: counts
    (Counter), the classes of otava's points and steps each side alone, with examples."""
    agree = Counter()
    out = {"agree": agree, "otava_alone": defaultdict(list), "wanted_missed": defaultdict(list),
           "held_missed": Counter(), "back_examples": [], "alone_examples": [],
           "steps": defaultdict(list), "missed": defaultdict(list)}  # fmt: skip
    for cell, history in cells.items():
        seqs, values = list(history), list(history.values())
        if len(values) < 2:
            continue
        verdict = verdicts[cell]
        theirs = otava_points(values)
        agree["port differs"] += [p.index for p in theirs] != [
            p.index for p in detect.change_points(values)
        ]
        ours = {ch.index for ch in verdict.changes if ch.kind == detect.STEP}
        step_ways = {(ch.index, ch.direction) for ch in verdict.changes if ch.kind == detect.STEP}
        at_theirs = {p.index for p in theirs}
        name = _cell_name(cell, folders, seqs)
        agree["both"] += len(ours & at_theirs)
        for index in sorted(ours):
            where = f"{name} at {folders[seqs[index]]}"
            if index not in at_theirs:
                agree["index alone"] += 1
                p_value = otava_ttest(values, verdict, index)
                agree["index alone, t-test"] += p_value <= OTAVA_PVALUE
                if p_value > OTAVA_PVALUE and not theirs:
                    agree["index alone, no otava point in the cell"] += 1
                if len(out["alone_examples"]) < 3:
                    out["alone_examples"].append(where)
            out["steps"][_confirmation(values, verdict, index, at_theirs)].append(where)
        ends = [p.index for p in theirs[1:]] + [len(values)] if theirs else []
        starts = ([0] + [p.index for p in theirs[:-1]]) if theirs else []
        for p, end, start in zip(theirs, ends, starts, strict=True):
            shift = p.stats.forward_rel_change()
            where = f"{name} at {folders[seqs[p.index]]}"
            found = _found(p.index, shift, step_ways)
            if p.index not in ours:
                reason = _reason(verdict, p.index)
                out["otava_alone"][reason].append(where)
                if abs(shift) >= 0.10 and end - p.index >= 5 and not found:
                    out["wanted_missed"][reason].append(f"{where} {shift:+.0%}")
            if abs(shift) < 0.10 or end - p.index < 5:
                continue
            agree["wanted"] += 1
            agree["wanted exactly"] += p.index in ours
            agree["wanted found"] += found
            agree["wanted at"] += any(ch.index == p.index for ch in verdict.changes)
            # The "new level lasts >= 5 publications", read on the points: from each
            # of the new level's first five publications on, the rest of otava's segment is
            # still >= 10 % off the old level on the change's side. A segment that holds a
            # short excursion and its return (otava cannot split the last few points of a
            # history off) fails it: that level lasted fewer publications.
            back = _comes_back(values, start, p.index, end)
            if back is None:
                agree["held"] += 1
                agree["held found"] += found
                if not found:
                    out["held_missed"][_reason(verdict, p.index)] += 1
            else:
                agree["came back, missed"] += not found
                if len(out["back_examples"]) < 3:
                    out["back_examples"].append(
                        f"{where} (the rest back from {folders[seqs[back]]} on)"
                    )
            if not found:
                off_host = [folders[seq] not in host for seq in seqs]
                off_phases = [folders[seq] not in phases for seq in seqs]
                miss, old, new = _miss_class(
                    values, verdict, p, (start, end), back, off_host, off_phases
                )
                unit = "ms" if cell[2] == "latency" else "MB"
                out["missed"][miss].append(f"{where}: {old / 1e6:.4g} -> {new / 1e6:.4g} {unit}")
    return out


def _found(index: int, shift: float, steps: set[tuple[int, str]]) -> bool:
    """Issue 44's (a) for one of otava's change points (its index and relative shift): a
    lasting step of the index the same way within one publication of it, the tolerance (b)
    confirms a step with. The index dates a level at its first point, one publication after
    an outlier that otava's segment starts with."""
    way = detect.REGRESSION if shift > 0 else detect.IMPROVEMENT
    return any(abs(index - j) <= 1 and d == way for j, d in steps)


def _confirmation(values, verdict, index, at_theirs) -> str:
    """Issue 44's (b) for one lasting step: confirmed by otava (a change point of its within
    one publication), else the named class of the disagreement, the first that applies."""
    if any(abs(index - j) <= 1 for j in at_theirs):
        return "confirmed: otava's change point within one publication"
    p_value = otava_ttest(values, verdict, index)
    if p_value <= OTAVA_PVALUE:
        return f"otava's t-test of the two levels gives p <= {OTAVA_PVALUE}"
    if p_value <= OTAVA_FIRST_PASS:
        return f"otava's t-test gives p <= {OTAVA_FIRST_PASS} (its first pass), not {OTAVA_PVALUE}"
    return "unexplained"


def _miss_class(values, verdict, p, segment, back, off_host, off_phases) -> tuple:
    """Why an otava change of >= 10 % with >= 5 points in its segment is no lasting step of
    the index within one publication: (class, old level, new level), the levels the medians
    of otava's two segments, from 'the host's excursions' on without the points at the host's
    large excursions (off_host False); for 'the end of a phase of the host' the old level is
    the up to WINDOW points before the change point without the publications of any of the
    host's excursions (off_phases False): the level the cell had before the host moved."""
    start, end = segment
    old = statistics.median(values[start : p.index])
    new = statistics.median(values[p.index : end])
    if back is not None:
        return f"the level came back ({_reason(verdict, p.index)} here)", old, new
    kept_old = [values[j] for j in range(start, p.index) if off_host[j]]
    kept_new = [values[j] for j in range(p.index, end) if off_host[j]]
    if kept_old and kept_new:
        old, new = statistics.median(kept_old), statistics.median(kept_new)
    side = 1 if p.stats.forward_rel_change() > 0 else -1
    if not kept_old or not kept_new or (new / old - 1) * side < 0.10:
        return "the level is the host's excursions", old, new
    # The baseline the index tests against (the WINDOW points before the change point), here
    # without the publications where the host moved: otava's change may be the end of a
    # phase of the host that its old segment holds, the cell back at the level it had.
    base = [values[j] for j in range(start, p.index) if off_phases[j]][-detect.WINDOW :]
    if base and (new / statistics.median(base) - 1) * side < 0.10:
        return "the end of a phase of the host", statistics.median(base), new
    status = "noisy cell" if verdict.status == detect.NOISY else "judged cell"
    return f"within the cell's own spread ({status})", old, new


def _print_agreement(out: dict, host: set[str], *, every: bool = False) -> None:
    agree = out["agree"]
    print("agreement with Apache Otava (CLI defaults: window 50, p-value 0.001, magnitude 0)")
    print(f"  cells where this rule's change points differ from otava's: {agree['port differs']}")
    steps = agree["both"] + agree["index alone"]
    print(f"  lasting steps at one of otava's change points: {agree['both']} of {steps} "
          f"({agree['both'] / max(steps, 1):.0%})")  # fmt: skip
    print(f"  lasting steps the index alone finds: {agree['index alone']}, of which otava's "
          f"t-test (p <= {OTAVA_PVALUE}) separates the two levels: "
          f"{agree['index alone, t-test']}; of the rest, in cells where otava finds no change "
          f"point at all: {agree['index alone, no otava point in the cell']}; "
          f"e.g. {'; '.join(out['alone_examples'])}")  # fmt: skip
    print(f"  otava's change points without a lasting step here: "
          f"{sum(len(v) for v in out['otava_alone'].values())}")  # fmt: skip
    for reason, where in sorted(out["otava_alone"].items(), key=lambda kv: -len(kv[1])):
        print(f"    {reason:22} {len(where):5}  e.g. {'; '.join(where[:2])}")
    wanted = agree["wanted"]
    print(f"  otava's changes of >= 10 % lasting >= 5 publications: {wanted}, found as lasting "
          f"steps within one publication: {agree['wanted found']} "
          f"({agree['wanted found'] / max(wanted, 1):.0%}); at that publication: "
          f"{agree['wanted exactly']}")  # fmt: skip
    print(f"  of those, reported at that publication as some change (a lasting step, a "
          f"transient, an outlier or pending): {agree['wanted at']} "
          f"({agree['wanted at'] / max(wanted, 1):.0%})")  # fmt: skip
    for reason, where in sorted(out["wanted_missed"].items(), key=lambda kv: -len(kv[1])):
        print(f"    missed, {reason:22} {len(where):4}  e.g. {'; '.join(where[:2])}")
    held = agree["held"]
    print(f"  of those, the ones whose new level lasts >= 5 publications (from each of its first "
          f"five points on, the rest of otava's segment is still >= 10 % off the old level): "
          f"{held}, found as lasting steps: {agree['held found']} "
          f"({agree['held found'] / max(held, 1):.0%}); missed: "
          f"{', '.join(f'{r} {n}' for r, n in out['held_missed'].most_common()) or 'none'}; the "
          f"{wanted - held} others came back, e.g. {'; '.join(out['back_examples'])}")  # fmt: skip
    print()
    print(f"(a) otava's changes of >= 10 % whose new level lasts >= 5 publications (on the "
          f"points): {held}; found as lasting steps within one publication: "
          f"{agree['held found']} ({agree['held found'] / max(held, 1):.1%})")  # fmt: skip
    back_missed = agree["came back, missed"]
    print(f"  read on otava's segments alone (>= 5 points after its change point): {wanted}; "
          f"found: {agree['wanted found']} ({agree['wanted found'] / max(wanted, 1):.1%}); of the "
          f"{wanted - agree['wanted found']} missed, {back_missed} are levels that came back "
          f"within otava's segment, which the rule reports as the excursions they were, so "
          f"it finds at most {wanted - back_missed} ({(wanted - back_missed) / max(wanted, 1):.1%}) "
          f"this way")  # fmt: skip
    print(f"  the {wanted - agree['wanted found']} missed, by class (levels: medians of otava's "
          f"two segments; for 'the host's excursions' and 'within the cell's own spread' "
          f"without the points at the host's large excursions, {', '.join(sorted(host))})")  # fmt: skip
    for cls, rows in sorted(out["missed"].items(), key=lambda kv: -len(kv[1])):
        print(f"    {cls:48} {len(rows):4}")
        for row in rows if every else rows[:3]:
            print(f"      {row}")
    total = sum(len(v) for v in out["steps"].values())
    unexplained = len(out["steps"].get("unexplained", []))
    confirmed = sum(len(v) for k, v in out["steps"].items() if k.startswith("confirmed"))
    print(f"(b) the index's lasting steps: {total}; confirmed by otava: {confirmed} "
          f"({confirmed / max(total, 1):.1%}); confirmed or in a named class: "
          f"{total - unexplained} ({(total - unexplained) / max(total, 1):.1%})")  # fmt: skip
    for cls, where in sorted(out["steps"].items(), key=lambda kv: -len(kv[1])):
        print(f"    {cls:62} {len(where):4}  e.g. {'; '.join(where[:2])}")


def _comes_back(values: list[float], start: int, index: int, end: int) -> int | None:
    """The first of the new level's first five points from which the rest of otava's segment
    [index, end) is less than 10 % off the old level [start, index) on the change's side, or
    None when the new level lasts."""
    old = statistics.median(values[start:index])
    side = 1 if statistics.median(values[index:end]) > old else -1
    for j in range(index, min(index + 5, end)):
        if (statistics.median(values[j:end]) / old - 1) * side < 0.10:
            return j
    return None


def _cell_name(cell: tuple, folders: list[str], seqs: list[int]) -> str:
    bench, timed_pass, metric, provider, workload = cell[:5]
    return f"{bench}/{provider}/{timed_pass}/{metric}/{workload}"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
