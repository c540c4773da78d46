"""kirunner/power.py: the window a sampling thread records while do_bench times (CPU tests:
a fake NVML stands in for the GPU's)."""

from __future__ import annotations

import sys
import time
import types

from jsonschema import Draft202012Validator

from kirunner import power
from kirunner.result_schema import POWER_WINDOW


def _samples(masks, sm=1965, watts=650.0):
    return [(i * 0.005, sm, watts, m) for i, m in enumerate(masks)]


def test_power_capped_needs_the_cap_bit_in_a_quarter_of_the_samples():
    cases = [
        ("never capped", [0] * 20, False),
        ("one transient in ten", [0x4] + [0] * 9, False),
        ("a quarter", [0x4] * 5 + [0] * 15, True),
        ("capped throughout", [0x4] * 20, True),
        ("thermal only", [0x20] * 20, False),
    ]
    got = [
        (name, power.summarize(_samples(m), source="test", interval_s=0.005)["powerCapped"])
        for name, m, _ in cases
    ]
    assert got == [(name, want) for name, _, want in cases]


def test_window_records_ranges_shares_and_thins_samples():
    samples = [(i * 0.005, 1500 + i % 3, 600.0 + i, 0x4 if i % 2 else 0) for i in range(1000)]
    w = power.summarize(samples, source="test", interval_s=0.005, limits={"powerLimitW": 700.0})
    assert w["n"] == 1000 and w["smMHz"] == {"min": 1500, "median": 1501.0, "max": 1502}
    assert w["powerW"]["max"] == 1599.0 and w["powerLimitW"] == 700.0
    assert w["reasonShares"] == {"software power cap": 0.5}
    assert len(w["samples"]) <= power.KEEP_SAMPLES
    assert not list(Draft202012Validator(POWER_WINDOW).iter_errors(w))


def test_no_sample_is_said_so_and_never_capped():
    w = power.summarize([], source="absent", interval_s=0.005)
    assert w["n"] == 0 and w["powerCapped"] is False and "no NVML" in w["absent"]


def test_power_capped_reads_a_window_or_a_dict_of_windows():
    capped = {"powerCapped": True}
    assert power.power_capped(capped)
    assert power.power_capped({"doBench": {"powerCapped": False}, "deviceTime": capped})
    assert not power.power_capped({"doBench": {"powerCapped": False}})
    assert not power.power_capped(None)


def _fake_nvml(mask: int) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM = 0
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetHandleByIndex = lambda i: ("gpu", i)
    nvml.nvmlDeviceGetClockInfo = lambda h, c: 1470
    nvml.nvmlDeviceGetMaxClockInfo = lambda h, c: 1980
    nvml.nvmlDeviceGetPowerUsage = lambda h: 699_000
    nvml.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000
    nvml.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: 700_000
    nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda h: mask
    return nvml


def test_sampler_samples_nvml_on_a_thread_while_the_window_runs(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(0x4))
    with power.Sampler(interval_s=0.001) as sampler:
        deadline = time.monotonic() + 5
        while len(sampler.samples) < 5 and time.monotonic() < deadline:
            time.sleep(0.002)
    w = sampler.window()
    assert w["source"] == "NVML (nvidia-ml-py)" and w["n"] >= 5
    assert w["smMHz"]["max"] == 1470 and w["maxSmMHz"] == 1980
    assert w["powerW"]["median"] == 699.0 and w["powerLimitW"] == 700.0
    assert w["powerCapped"] is True and w["reasonShares"] == {"software power cap": 1.0}


def test_sampler_without_nvml_or_nvidia_smi_says_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    monkeypatch.setattr(power.shutil, "which", lambda name: None)
    with power.Sampler() as sampler:
        pass
    w = sampler.window()
    assert w["source"] == "absent" and w["n"] == 0 and w["powerCapped"] is False


def test_a_failing_nvml_never_costs_the_measurement(monkeypatch):
    nvml = _fake_nvml(0)

    def broken(h, c):
        raise RuntimeError("GPU is lost")

    nvml.nvmlDeviceGetClockInfo = broken
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with power.Sampler(interval_s=0.001) as sampler:
        time.sleep(0.01)
    w = sampler.window()
    assert w["n"] == 0 and "GPU is lost" in w["error"]


def test_nvml_starts_once_for_every_reading_and_is_never_shut_down(monkeypatch):
    """A latency job reads the GPU six times (clocks, state, two samplers): one start of NVML
    serves them all, where each used to start and shut it down."""
    from kirunner import diagnose, env

    nvml = _fake_nvml(0)
    calls = {"init": 0, "shutdown": 0}
    nvml.nvmlInit = lambda: calls.__setitem__("init", calls["init"] + 1)
    nvml.nvmlShutdown = lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1)
    nvml.NVML_CLOCK_MEM, nvml.NVML_TEMPERATURE_GPU = 1, 0
    nvml.nvmlDeviceGetTemperature = lambda h, s: 41
    nvml.nvmlDeviceGetPerformanceState = lambda h: 0
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    for _ in range(2):
        assert env.gpu_clocks(0)["smMHz"] == 1470
        assert diagnose.nvml_state(0)["powerLimitW"] == 700.0
        with power.Sampler(interval_s=0.001) as sampler:
            time.sleep(0.005)
        assert sampler.window()["n"] >= 1
    assert calls == {"init": 1, "shutdown": 0}


def test_nvml_that_does_not_start_reads_as_absent(monkeypatch):
    from kirunner import diagnose

    nvml = _fake_nvml(0)

    def no_driver():
        raise RuntimeError("NVML Shared Library Not Found")

    nvml.nvmlInit = no_driver
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert diagnose.nvml_state(0) is None
    with power.Sampler(interval_s=0.001) as sampler:
        time.sleep(0.002)
    assert sampler.window()["n"] == 0


def test_sampler_off_starts_no_thread_and_says_so(monkeypatch):
    """KIRUNNER_POWER_SAMPLER=off (the with/without comparison of bench/fidelity): no
    sampling thread at all, even where NVML answers; the window says why it is empty."""
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(0x4))
    monkeypatch.setenv(power.SAMPLER_ENV, "off")
    with power.Sampler(interval_s=0.001) as sampler:
        time.sleep(0.01)
    assert sampler._thread is None
    w = sampler.window()
    assert w["source"] == "off (KIRUNNER_POWER_SAMPLER=off)" and w["n"] == 0
    assert w["powerCapped"] is False
