"""The Celery app. Queues: `default` (the sweeper) and one `gpu.<class>` per GPU class of the
catalogue; a GPU host's worker serves the queue of the GPU it has:

    celery -A kernelindex worker -Q gpu.h200 --pool=prefork -c 1
    celery -A kernelindex beat

A job goes to its queue by name when it is sent (reruns.services.rerun_dispatch), since the
queue is a property of the job, not of the task.
"""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

from runs.reference.catalogue import GPUS

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")

app = Celery("kernelindex")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Rerun queues and limits.
_prefix = os.getenv("KERNELINDEX_QUEUE_PREFIX", "")
app.conf.task_queues = [Queue("default")] + [
    Queue(f"{_prefix}gpu.{gpu_class}")
    for gpu_class in sorted({spec.gpu_class for spec in GPUS.values()})
]
app.conf.accept_content = ["json"]
app.conf.task_serializer = "json"
