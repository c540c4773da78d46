"""The physical-plausibility floor of a latency: the fewest bytes a workload must move, over
the GPU's datasheet peak memory bandwidth.

What is counted, and only that: for a forward pass, every input tensor read once from device
memory plus every output tensor written once. Weights, activations kept for backward,
intermediate results and caches are not counted, so the true traffic is higher and the floor is
a floor. Backward and full passes, memory metrics, and kernels whose tensors are not known here
get no floor: the page says "not known" rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from runs.reference.catalogue import input_tensors, tensor_bytes


@dataclass(frozen=True)
class Floor:
    read_bytes: int
    written_bytes: int
    bandwidth_gbs: float
    floor_ns: float
    ratio: float  # median / floor

    @property
    def total_bytes(self) -> int:
        return self.read_bytes + self.written_bytes

    @property
    def implausible(self) -> bool:
        return self.ratio < 1


def output_tensors(benchmark: str, params: dict, inputs: list[dict]) -> list[dict] | None:
    """The forward pass's outputs, from its inputs; None where this module does not know them."""
    by_name = {t["name"]: t for t in inputs}
    if benchmark in ("llama4_rope", "rope"):
        return [by_name["q"], by_name["k"]]  # rotated q and k, same shape and dtype
    if benchmark in ("rms_norm", "layer_norm", "softmax", "swiglu", "geglu"):
        return [by_name["x"]]  # same shape and dtype as the activation input
    if benchmark == "cross_entropy":
        return [{"name": "loss", "dtype": "fp32", "shape": []}]  # mean-reduced scalar
    return None


def floor_for(run) -> tuple[Floor | None, str]:
    """(floor, reason when there is none)."""
    bandwidth = run.environment.gpu.peak_bandwidth_gbs
    traffic, reason = traffic_for(
        run.benchmark.slug, run.timed_pass, run.metric, run.workload.parameters
    )
    if traffic is None:
        return None, reason
    if not bandwidth or run.median <= 0:
        return None, "not known: no peak bandwidth for this GPU"
    read, written = traffic
    floor_ns = (read + written) / bandwidth  # bytes / (GB/s) = ns
    return Floor(read, written, bandwidth, floor_ns, run.median / floor_ns), ""


def floor_ns(
    benchmark: str, timed_pass: str, metric: str, params: dict, bandwidth_gbs: float | None
) -> float | None:
    """The floor in ns of one call of this cell on a GPU of this bandwidth, or None: what a
    result's figures are checked against (kirunner.sanity) before they are recorded."""
    traffic, _ = traffic_for(benchmark, timed_pass, metric, params)
    if traffic is None or not bandwidth_gbs:
        return None
    return sum(traffic) / bandwidth_gbs


def traffic_for(
    benchmark: str, timed_pass: str, metric: str, params: dict
) -> tuple[tuple[int, int] | None, str]:
    """((bytes read, bytes written), "") of the cell's modelled traffic, or (None, why not)."""
    if metric != "latency":
        return None, "not computed for memory measurements"
    if timed_pass != "forward":
        return None, "not known: only the forward pass's minimum traffic is modelled here"
    inputs = input_tensors(benchmark, params)
    if not inputs:
        return None, "not known: this kernel's tensors are not known here"
    outputs = output_tensors(benchmark, params, inputs)
    read = [tensor_bytes(t) for t in inputs]
    written = [tensor_bytes(t) for t in outputs] if outputs is not None else [None]
    if outputs is None or None in read or None in written:
        return None, "not known: this kernel's outputs are not known here"
    return (sum(read), sum(written)), ""
