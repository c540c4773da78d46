"""Celery delivery settings that the rerun design depends on."""

from __future__ import annotations

from django.conf import settings

from kernelindex.celery import app
from reruns import services
from reruns.tasks import rerun_execute
from runs.reference.catalogue import GPUS


def test_delivery_is_safe_by_configuration():
    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_serializer == "json" and list(conf.accept_content) == ["json"]
    visibility = conf.broker_transport_options["visibility_timeout"]
    # The broker must never hand a job to a second worker while the first may still run it.
    assert rerun_execute.soft_time_limit < rerun_execute.time_limit < visibility
    assert settings.RERUN_HARD_TIME_LIMIT == rerun_execute.time_limit
    assert "reruns.tasks.rerun_sweep" in {e["task"] for e in conf.beat_schedule.values()}


def test_one_queue_per_gpu_class_plus_default():
    names = {q.name for q in app.conf.task_queues}
    assert "default" in names
    for spec in GPUS.values():
        assert f"gpu.{spec.gpu_class}" in names


def test_dispatch_sends_the_task_the_worker_registers():
    """rerun_dispatch names the task instead of importing it; the name must be the task's."""
    assert services.EXECUTE_TASK == rerun_execute.name
    assert services.EXECUTE_TASK in app.tasks
