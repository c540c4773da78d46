"""No verdict on one sample.

Some upstream scripts time a handful of calls or one (geglu passes rep=10 ms to do_bench: one
sample for a 6 ms kernel). A do_bench median of fewer than FEW_SAMPLES samples is one draw of
a noisy figure: on the lent H200 such a draw sat 7-11 % off upstream while the device time
(ten gap-free replays) was within 1 %. So when the figure a verdict would rest on has fewer
than FEW_SAMPLES samples, the verdict needs one of:

1. agreement across independent processes: every other runner process that recorded this
   run (an earlier event whose facts carry another process id) gives the same verdict with its
   own median, against the same tolerance; any disagreement is `checked`;
2. failing other processes, the cold device time, when its repeats are consistent: the
   verdict rests on it, and says so;
3. otherwise `checked`, with the reason.

`judge` is plain Python over numbers (tests/runs/test_samples_rule.py drives it with a table);
`other_processes` reads the earlier events of the run. runs/evidence.py also weighs them for
a figure of many samples: a device-bound verdict rests on the median of every independent
process that timed the run, not on whichever process came last.
"""

from __future__ import annotations

from dataclasses import dataclass

FEW_SAMPLES = 5


@dataclass(frozen=True)
class Few:
    level: str  # "reproduced", "not-reproduced" or "checked"
    basis: str  # "processes", "device-time" or "none"
    why: str


def percent_apart(deviation: float, tolerance: float) -> str:
    """The deviation as a percentage with the decimals that tell it from the tolerance: 34.002 %
    against 34 %, not "34.0 % off, outside the 34 % tolerance"."""
    for digits in (1, 2, 3):
        text = f"{deviation:.{digits}%}"
        if text != f"{tolerance:.{digits}%}":
            return text
    return text


def _within(value: float, published: float, tolerance: float) -> bool:
    return abs(value - published) / published <= tolerance


def judge(
    *,
    measured: float,
    published: float,
    tolerance: float,
    samples: int,
    others: list[float],
    device: float | None,
    device_consistent: bool,
) -> Few:
    """The verdict of a do_bench figure resting on `samples` < FEW_SAMPLES samples."""
    mine = _within(measured, published, tolerance)
    word = "reproduced" if mine else "not-reproduced"
    if others:
        agree = [o for o in others if _within(o, published, tolerance) == mine]
        if len(agree) == len(others):
            return Few(
                word,
                "processes",
                f"do_bench rests on {samples} sample(s); {len(others) + 1} independent "
                f"processes agree ({', '.join(f'{o / 1e6:.4g}' for o in [measured, *others])} ms)",
            )
        return Few(
            "checked",
            "none",
            f"do_bench rests on {samples} sample(s) and independent processes disagree "
            f"({', '.join(f'{o / 1e6:.4g}' for o in [measured, *others])} ms against "
            f"{published / 1e6:.4g} ms published, {tolerance:.0%} tolerance)",
        )
    if device is not None and device_consistent:
        inside = _within(device, published, tolerance)
        off = percent_apart(abs(device - published) / published, tolerance)
        return Few(
            "reproduced" if inside else "not-reproduced",
            "device-time",
            f"do_bench rests on {samples} sample(s); the verdict rests on the device time "
            f"{device / 1e6:.4g} ms (ten replays, consistent), {off} off the published "
            f"median, {'within' if inside else 'outside'} the {tolerance:.0%} tolerance",
        )
    return Few(
        "checked",
        "none",
        f"do_bench rests on {samples} sample(s), no other process measured this run and no "
        "consistent device time was recorded: one draw neither confirms nor refutes",
    )


def other_processes(run, process: str | None, metric: str, *, device_bound: bool = False):
    """The measured figures (run units) of earlier events of `run` from other runner
    processes on the run's own GPU product, the latest of each process; with `device_bound`,
    only those the runner classified device-bound (the figures a timing verdict rests on)."""
    from runs.models import EvidenceEvent

    rows = (
        EvidenceEvent.objects.filter(run=run, controlled_run__isnull=False)
        .order_by("pk")
        .values_list("pk", "facts")
    )
    latest: dict[str, float] = {}
    for pk, facts in rows:
        if not isinstance(facts, dict) or facts.get("metric") != metric:
            continue
        if facts.get("gpuProduct") != facts.get("originalGpuProduct"):
            continue
        if process is not None and facts.get("process") == process:
            continue
        kind = (facts.get("classification") or {}).get("kind")
        if device_bound and kind != "device-bound":
            continue
        value = facts.get("measured")
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            # Results of runners before process ids: each was its own batch's process.
            latest[facts.get("process") or f"event {pk}"] = float(value)
    return list(latest.values())


def other_checks_passed(run, process: str | None) -> int:
    """How many other runner processes passed `run`'s correctness check on a GPU (the latest
    event of each): the same implementation and check, other random inputs."""
    from runs.models import EvidenceEvent

    rows = EvidenceEvent.objects.filter(run=run).order_by("pk").values_list("pk", "facts")
    latest: dict[str, bool] = {}
    for pk, facts in rows:
        if not isinstance(facts, dict) or facts.get("device") != "cuda":
            continue
        if process is not None and facts.get("process") == process:
            continue
        latest[facts.get("process") or f"event {pk}"] = facts.get("correctnessPassed") is True
    return sum(latest.values())
