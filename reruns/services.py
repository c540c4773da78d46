"""Writes for reruns: request, approve, dispatch, sweep, and recording a signed result.

Dispatch happens only on commit of the transaction that made a job queued, so a rolled-back
request sends nothing, and a worker never reads a row that is not there yet. Sending never
raises to the caller: an unreachable broker leaves the job queued, with the reason in
`dispatch_error`, and the sweeper sends it once the broker answers.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import uuid
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from kirunner import sanity, sign
from kirunner.canonical import canonicalize, digest_bytes
from reruns import controlled, signing
from reruns.models import (
    ACTIVE_STATES,
    JobState,
    RejectedResult,
    RejectReason,
    RerunJob,
    ResultReceipt,
)
from reruns.result_schema import result_problem
from runs.evidence import (
    RULE_VERSION,
    NoVerdict,
    evidence_apply,
    evidence_withdraw,
    outcome_decide,
    run_fidelity,
)
from runs.models import Evidence, Publication, Run
from runs.reference import catalogue, plausibility
from runs.sources.base import IngestError
from runs.sources.documents import Resolver
from runs.sources.ranking import rank_publication

log = logging.getLogger(__name__)

NO_BROKER = "no broker configured: jobs wait as queued"
# The task is sent by its registered name (reruns/tasks.py names it so), not imported: the
# tasks call these services back, and a name keeps the arrow one-way, tasks -> services.
EXECUTE_TASK = "reruns.tasks.rerun_execute"
GPU_CLASSES = sorted({spec.gpu_class for spec in catalogue.GPUS.values()})


class RerunError(ValueError):
    """A request that cannot be honoured; the message is for the person who asked."""


class ResultRejected(ValueError):
    def __init__(self, reason: str, detail: str):
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


def broker_configured() -> bool:
    return bool(settings.CELERY_BROKER_URL)


# --- Requests and approval ------------------------------------------------------------------


def rerun_request(
    *, run: Run, requested_by: AbstractBaseUser | AnonymousUser | None, gpu_class: str | None = None
) -> RerunJob:
    """Ask for a controlled rerun of `run` on `gpu_class` (default: the run's own GPU class).

    Staff orders are approved at once and sent when the transaction commits; anyone else's
    request waits for a maintainer's approval in the admin.
    """
    if requested_by is None or not requested_by.is_authenticated:
        raise RerunError("Log in to request a controlled rerun.")
    if run.source.slug == "kernelindex":
        raise RerunError("This run is itself a controlled rerun.")
    gpu_class = gpu_class or run.environment.gpu.gpu_class
    if gpu_class not in GPU_CLASSES:
        raise RerunError(f"Unknown GPU class {gpu_class!r}; known: {', '.join(GPU_CLASSES)}.")
    try:
        with transaction.atomic():
            job = RerunJob.objects.create(
                run=run,
                gpu_class=gpu_class,
                requested_by=requested_by,
                max_attempts=settings.RERUN_MAX_ATTEMPTS,
            )
            if requested_by.is_staff:
                rerun_approve(job=job, approved_by=requested_by)
    except IntegrityError:
        raise RerunError(
            f"A rerun of {run.public_id} on {gpu_class} is already open; see its state below."
        ) from None
    job.refresh_from_db()
    return job


def rerun_approve(*, job: RerunJob, approved_by: AbstractBaseUser) -> RerunJob:
    """awaiting-approval -> queued, then dispatch on commit. A no-op for any other state."""
    with transaction.atomic():
        now = timezone.now()
        updated = RerunJob.objects.filter(pk=job.pk, state=JobState.AWAITING_APPROVAL).update(
            state=JobState.QUEUED, approved_by=approved_by, issued_at=now
        )
        if updated:
            pk = job.pk
            transaction.on_commit(lambda: rerun_dispatch(job=RerunJob.objects.get(pk=pk)))
    job.refresh_from_db()
    return job


def rerun_order_offline(*, run: Run, gpu_class: str | None = None) -> RerunJob:
    """An approved job for a GPU host without broker access (manage.py rerun order): issued
    now, never sent to a queue; `rerun export` writes its job file, `rerun import` records
    the result file."""
    if run.source.slug == "kernelindex":
        raise RerunError("This run is itself a controlled rerun.")
    gpu_class = gpu_class or run.environment.gpu.gpu_class
    if gpu_class not in GPU_CLASSES:
        raise RerunError(f"Unknown GPU class {gpu_class!r}; known: {', '.join(GPU_CLASSES)}.")
    try:
        with transaction.atomic():
            return RerunJob.objects.create(
                run=run,
                gpu_class=gpu_class,
                state=JobState.QUEUED,
                offline=True,
                issued_at=timezone.now(),
                max_attempts=settings.RERUN_MAX_ATTEMPTS,
            )
    except IntegrityError:
        raise RerunError(f"A rerun of {run.public_id} on {gpu_class} is already open.") from None


def rerun_cancel(*, job: RerunJob) -> bool:
    """Cancel a job that no worker holds; a running one finishes on its own."""
    return bool(
        RerunJob.objects.filter(
            pk=job.pk, state__in=[JobState.AWAITING_APPROVAL, JobState.QUEUED]
        ).update(state=JobState.CANCELLED, finished_at=timezone.now())
    )


# --- Dispatch and sweeping ------------------------------------------------------------------


def rerun_dispatch(*, job: RerunJob) -> bool:
    """Send a queued job's pk to its queue. True when the broker took it.

    Call it from transaction.on_commit (rerun_approve does): the worker must find the row.
    """
    if job.state != JobState.QUEUED or job.offline:
        return False
    if not broker_configured():
        RerunJob.objects.filter(pk=job.pk).update(dispatch_error=NO_BROKER)
        return False
    try:
        # retry=False: with the broker down, say so now instead of blocking the request.
        current_app.send_task(
            EXECUTE_TASK,
            args=[job.pk],
            queue=job.queue,
            retry=False,
            headers={"job": str(job.uuid)},
        )
    except Exception as exc:  # kombu.OperationalError, redis.ConnectionError, socket errors
        message = (
            f"broker unreachable ({type(exc).__name__}: {exc}); the job stays queued and is "
            f"sent when the broker is back"
        )
        log.warning("rerun %s not sent: %s", job.uuid, message)
        RerunJob.objects.filter(pk=job.pk).update(dispatch_error=message[:2000])
        return False
    RerunJob.objects.filter(pk=job.pk).update(dispatched_at=timezone.now(), dispatch_error="")
    return True


def rerun_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The periodic repair pass (Celery beat runs it every minute):

    1. queued jobs out of attempts fail;
    2. running jobs that lost their worker: no heartbeat for RERUN_HEARTBEAT_TIMEOUT (the
       whole worker killed), or, for a row that never beat, past the hard time limit. With
       attempts left they go back to queued (and are sent below, once: the requeue is one
       conditional UPDATE, so a second sweep finds nothing), else they fail;
    3. queued jobs never sent (broker was down or absent) are sent;
    4. queued jobs sent long ago and still unclaimed (message lost) are sent again; a
       duplicate message is harmless, since only one delivery can claim the row.
    """
    now = now or timezone.now()
    counts = {"failed": 0, "requeued": 0, "sent": 0, "resent": 0}
    counts["failed"] += RerunJob.objects.filter(
        state=JobState.QUEUED, attempts__gte=F("max_attempts")
    ).update(state=JobState.FAILED, finished_at=now, error="ran out of attempts")
    stuck_before = now - timedelta(seconds=settings.RERUN_HARD_TIME_LIMIT + 60)
    silent_before = now - timedelta(seconds=settings.RERUN_HEARTBEAT_TIMEOUT)
    lost = RerunJob.objects.running_since_before(stuck_before).filter(heartbeat_at__isnull=True)
    for job in lost | RerunJob.objects.silent_since(silent_before):
        if job.attempts >= job.max_attempts:
            counts["failed"] += RerunJob.objects.filter(pk=job.pk, state=JobState.RUNNING).update(
                state=JobState.FAILED,
                finished_at=now,
                error=f"worker {job.worker} stopped answering; ran out of attempts",
            )
        else:
            counts["requeued"] += RerunJob.objects.filter(pk=job.pk, state=JobState.RUNNING).update(
                state=JobState.QUEUED, dispatched_at=None, heartbeat_at=None
            )
    if not broker_configured():
        return counts
    for job in RerunJob.objects.never_sent():
        counts["sent"] += rerun_dispatch(job=job)
    resend_before = now - timedelta(seconds=settings.RERUN_REDISPATCH_AFTER)
    for job in RerunJob.objects.sent_before(resend_before):
        counts["resent"] += rerun_dispatch(job=job)
    return counts


# --- Claiming (used by the worker task) -----------------------------------------------------


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _process_gone(worker: str) -> bool:
    """True when `worker` (host:pid) ran on this host and its process no longer exists."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # A zombie is gone too: the pool reaps its killed children, but may not have yet.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] == "Z"
    except (OSError, IndexError):
        return False


def rerun_claim(*, job_pk: int) -> RerunJob | None:
    """Claim a job for this process, or return None when another delivery holds it.

    The claim is one conditional UPDATE from queued, so two deliveries cannot both win. A
    redelivery after the claiming process died (a pool child killed mid-job: the broker
    requeues its unacknowledged message) may also take over a running row, but only when
    that process is provably gone: same host, no such pid. Elsewhere the sweeper requeues
    the row once the hard time limit has passed.
    """
    row = RerunJob.objects.filter(pk=job_pk).values("state", "worker").first()
    if row is None:
        return None
    claimable = Q(state=JobState.QUEUED)
    if row["state"] == JobState.RUNNING and row["worker"] and _process_gone(row["worker"]):
        claimable |= Q(state=JobState.RUNNING, worker=row["worker"])
    claimed = (
        RerunJob.objects.filter(claimable, pk=job_pk, attempts__lt=F("max_attempts"))
        .exclude(state__in=[JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED])
        .update(
            state=JobState.RUNNING,
            started_at=timezone.now(),
            heartbeat_at=timezone.now(),
            attempts=F("attempts") + 1,
            worker=worker_name(),
        )
    )
    if not claimed:
        return None
    return RerunJob.objects.select_related("run").get(pk=job_pk)


def rerun_heartbeat(*, job: RerunJob) -> bool:
    """The running attempt is alive. False when the row is no longer this attempt's (the
    sweeper requeued it, or it finished): the caller's result will then not be recorded twice,
    since only one delivery can claim and record a job."""
    return bool(
        RerunJob.objects.filter(pk=job.pk, state=JobState.RUNNING, worker=job.worker).update(
            heartbeat_at=timezone.now()
        )
    )


def rerun_attempt_failed(*, job: RerunJob, error: str, retry: bool) -> bool:
    """End a failed attempt. With attempts left and `retry`, back to queued (True: the caller
    schedules the retry); else the job fails for good."""
    job.refresh_from_db()
    if retry and job.attempts < job.max_attempts:
        RerunJob.objects.filter(pk=job.pk, state=JobState.RUNNING).update(
            state=JobState.QUEUED, error=error[:4000]
        )
        return True
    RerunJob.objects.filter(pk=job.pk, state=JobState.RUNNING).update(
        state=JobState.FAILED, error=error[:4000], finished_at=timezone.now()
    )
    return False


# --- Recording a signed result --------------------------------------------------------------


def _reject(
    reason: str, detail: str, *, via: str, job=None, job_ref="", key_id="", digest=""
) -> ResultRejected:
    RejectedResult.objects.create(
        reason=reason,
        detail=detail[:4000],
        job=job,
        job_ref=str(job_ref)[:100],
        key_id=str(key_id)[:100],
        payload_digest=digest,
        via=via,
    )
    log.warning("rerun result rejected (%s): %s", reason, detail)
    return ResultRejected(reason, detail)


def _parse_time(value) -> datetime | None:
    if not isinstance(value, str):
        return None
    parsed = parse_datetime(value)
    if parsed is None or parsed.tzinfo is None:
        return None
    return parsed


def result_record(
    *, envelope: dict, via: str = "worker", keys: dict[str, bytes] | None = None
) -> ResultReceipt:
    """Verify a signed RerunResult and record it once. Raises ResultRejected, logged, with
    nothing else changed, for a malformed, unsigned, tampered, unknown-key, foreign, replayed,
    stale or implausible result.

    1. The schema (reruns/result_schema.py), then the key id, then the HMAC over the RFC 8785
       bytes of `payload`.
    2. The job: payload.job.id names an existing job whose nonce, run and cell match.
    3. Not finished already (a replay), and fresh: finishedAt after the job was issued, within
       RERUN_RESULT_MAX_AGE of it, and not in the future.
    4. Sane figures (kirunner.sanity): every figure of a measured result finite, positive, in
       order, within its ceilings and not below the cell's plausibility floor on that GPU.
    5. In one transaction, with the job row locked: the controlled run (GPU results, through
       the ingest door and its record checks), the receipt, the evidence move on the original
       run, and the job's final state.

    `keys` replaces the configured KERNELINDEX_WORKER_KEYS (load-demo passes the demo key).
    Many results in a row go through one ResultRecorder instead (the same steps).
    """
    return ResultRecorder(via=via, keys=keys).record(envelope)


class ResultRecorder:
    """Records results one after another exactly as result_record does, each with every check
    and its own transaction (a savepoint inside the caller's), sharing what a row of them has
    in common: the source `kernelindex` and the documents their controlled runs refer to (one
    runs.sources.documents.Resolver, as one ingest of many files shares it). Each result is
    still judged after the one before it was applied: the rule reads the events written so
    far (other runner processes of the same run).

    `rank_later`: the publications the controlled runs go into are ranked by rank(), once
    each, not after every result (ranking is a pass over the whole publication); the caller
    calls it before its transaction commits. `manage.py rerun load-demo` records a batch
    folder so, inside one transaction (figures in its docstring and docs/performance.md,
    "Demo load").
    """

    def __init__(
        self, *, via: str = "worker", keys: dict[str, bytes] | None = None, rank_later: bool = False
    ):
        self.via = via
        self.keys = keys
        self._resolver = Resolver()
        self._source = None
        self._unranked: set[int] | None = set() if rank_later else None

    def record(self, envelope: dict, *, job: RerunJob | None = None) -> ResultReceipt:
        """result_record's steps 1 to 5 for one envelope. `job`: the row the caller read or
        created for it in this transaction, with its run (load-demo); the job the payload
        names is then not read again, and every check of it is made as for a row read."""
        payload, context, canonical = _well_formed(envelope, self.via)
        _signed(envelope, self.keys, context, canonical)
        job = _job_of(payload, context, job)
        gpu_spec = _gpu_of(payload, context)
        implausible = _why_implausible(job, payload, gpu_spec)
        if implausible:
            raise _reject(RejectReason.IMPLAUSIBLE, implausible, **context)
        try:
            with transaction.atomic():
                locked = RerunJob.objects.select_for_update().get(pk=job.pk)
                if locked.is_finished:
                    raise IntegrityError("finished meanwhile")
                # The run and its documents as _job_of read them: a run's revision does not
                # change, and its level is read again under its own lock (evidence_apply).
                locked.run = job.run
                signature = envelope["signature"]
                return _record(locked, payload, canonical, signature, context, gpu_spec, self)
        except IntegrityError:
            self._forget()
            # Another delivery recorded it between our checks and the lock: a replay.
            raise _reject(
                RejectReason.REPLAY, f"job {job.uuid} was recorded meanwhile", **context
            ) from None
        except IngestError as exc:
            self._forget()
            # The controlled run's record failed the checks every upstream record passes (a
            # revision name longer than its column, say); the transaction wrote nothing.
            refused = "; ".join(message for _, message in exc.problems)
            raise _reject(
                RejectReason.MALFORMED,
                f"the record of this result was refused: {refused}",
                **context,
            ) from None

    def _forget(self) -> None:
        """Drop what the recorder shares: a rolled-back result may have created it."""
        self._resolver = Resolver()
        self._source = None

    def controlled_run(self, *, job: RerunJob, payload: dict, canonical: bytes, gpu_spec) -> Run:
        if self._source is None:
            self._source = controlled.source_ensure()
        return controlled.controlled_run_from(
            job=job, payload=payload, gpu_spec=gpu_spec, canonical=canonical,
            source=self._source, resolver=self._resolver, unranked=self._unranked,
        )  # fmt: skip

    def rank(self) -> None:
        """Rank the publications controlled runs went into since the last call (rank_later)."""
        for pk in sorted(self._unranked or ()):
            rank_publication(Publication(pk=pk))
        if self._unranked:
            self._unranked.clear()


def _well_formed(envelope: dict, via: str) -> tuple[dict, dict, bytes]:
    """The payload of a RerunResult that passes the schema and has a canonical form, the
    context every later rejection is logged with, and the payload's canonical bytes (its
    digest's, and the controlled run's ledger entry's: made once, the costliest step of
    reading a result after the signature's own)."""
    problem = result_problem(envelope)
    if problem is not None:
        payload = envelope.get("payload") if isinstance(envelope, dict) else None
        job_info = payload.get("job") if isinstance(payload, dict) else None
        job_ref = job_info.get("id") if isinstance(job_info, dict) else ""
        raise _reject(
            RejectReason.MALFORMED,
            f"not a valid RerunResult: {problem}",
            via=via,
            job_ref=job_ref if isinstance(job_ref, str) else "",
        )
    payload = envelope["payload"]
    job_info = payload.get("job") if isinstance(payload.get("job"), dict) else {}
    context = {"via": via, "job_ref": job_info.get("id") or ""}
    try:
        canonical = canonicalize(payload)
    except Exception as exc:  # rfc8785 refuses NaN, huge ints, non-string keys
        raise _reject(
            RejectReason.MALFORMED, f"payload has no canonical form: {exc}", **context
        ) from None
    context["digest"] = digest_bytes(canonical)
    if envelope.get("kind") != "RerunResult" or envelope.get("apiVersion") != controlled.API:
        raise _reject(
            RejectReason.MALFORMED, f"expected kind RerunResult of {controlled.API}", **context
        )
    return payload, context, canonical


def _signed(envelope: dict, keys: dict[str, bytes] | None, context: dict, canonical: bytes) -> None:
    """Refuse an envelope not signed by a known worker key over its payload's canonical bytes
    (_well_formed's); the key id joins the rejection context."""
    sig = envelope.get("signature")
    if not isinstance(sig, dict) or sig.get("alg") != sign.ALG:
        raise _reject(RejectReason.MALFORMED, "unsigned, or not signed with HMAC-SHA256", **context)
    key_id = sig.get("keyId")
    context["key_id"] = key_id or ""
    if not isinstance(key_id, str):
        key = None
    elif keys is not None:
        key = keys.get(key_id)
    else:
        key = signing.server_key(key_id)
    if key is None:
        raise _reject(RejectReason.UNKNOWN_KEY, f"no worker key with id {key_id!r}", **context)
    if not sign.verify_result(envelope, key, canonical=canonical):
        raise _reject(RejectReason.TAMPERED, "the signature does not match the payload", **context)


# What checking, judging and recording a result read of the job's run: one query, not one
# per relation.
RUN_RELATED = (
    "implementation",
    "environment__gpu",
    "source",
    "benchmark",
    "workload",
    "publication",
)
_JOB_RUN = tuple(f"run__{name}" for name in RUN_RELATED)


def _job_of(payload: dict, context: dict, known: RerunJob | None = None) -> RerunJob:
    """The approved, unfinished job the payload answers, within its freshness window; the job
    joins the rejection context. `known`: the caller's row of that job, if it is that job."""
    job_ref = context["job_ref"]
    job_uuid = _uuid_or_none(job_ref)
    if known is not None and known.uuid == job_uuid:
        job = known
    else:
        job = RerunJob.objects.select_related(*_JOB_RUN).filter(uuid=job_uuid).first()
    if job is None:
        raise _reject(RejectReason.FOREIGN_JOB, f"no job {job_ref!r}", **context)
    context["job"] = job
    problem = _why_foreign(job, payload)
    if problem:
        raise _reject(RejectReason.FOREIGN_JOB, problem, **context)
    if job.is_finished or ResultReceipt.objects.filter(job=job).exists():
        raise _reject(RejectReason.REPLAY, f"job {job.uuid} is already {job.state}", **context)
    if job.state == JobState.AWAITING_APPROVAL or job.issued_at is None:
        raise _reject(RejectReason.FOREIGN_JOB, "the job was never approved", **context)
    stale = _why_stale(job, payload)
    if stale:
        raise _reject(RejectReason.STALE, stale, **context)
    return job


def _gpu_of(payload: dict, context: dict) -> catalogue.GpuSpec | None:
    """The catalogue's GPU a GPU result names (None for a CPU result)."""
    if payload.get("device") != "cuda":
        return None
    gpu_name = (payload.get("environment") or {}).get("gpuName")
    gpu_spec = catalogue.GPUS.get(gpu_name)
    if gpu_spec is None:
        raise _reject(
            RejectReason.UNKNOWN_GPU,
            f"GPU {gpu_name!r} is not in the catalogue; add it, then import again",
            **context,
        )
    return gpu_spec


def _uuid_or_none(value):
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _why_foreign(job: RerunJob, payload: dict) -> str:
    """Why the payload is not this job's result, or ''."""
    job_info = payload.get("job") or {}
    if job_info.get("nonce") != job.nonce:
        return "the nonce does not match the job's"
    run_ref = (payload.get("run") or {}).get("publicId")
    if run_ref != job.run.public_id:
        return f"the result is for run {run_ref!r}, the job for {job.run.public_id}"
    expected = {
        "benchmark": job.run.benchmark.slug,
        "pass": job.run.timed_pass,
        "metric": job.run.metric,
        "provider": job.run.implementation.provider_key,
    }
    for name, want in expected.items():
        if payload.get(name) != want:
            return f"{name} is {payload.get(name)!r}, the job asked for {want!r}"
    return ""


def _why_implausible(job: RerunJob, payload: dict, gpu_spec) -> str:
    """Why the figures of a measured result cannot be real (kirunner.sanity), or ''. Checked
    after the signature: a valid signature says who measured, not that the numbers are sane."""
    if payload.get("status") not in ("ok", "incorrect"):
        return ""  # nothing measured, nothing recorded but the failure
    run = job.run
    floor = memory = None
    if gpu_spec is not None:
        params = controlled.ran_parameters(run, payload)
        floor = plausibility.floor_ns(
            run.benchmark.slug, run.timed_pass, run.metric, params, gpu_spec.peak_bandwidth_gbs
        )
        memory = gpu_spec.memory_gib * 2**30
    problems = sanity.measurement_problems(
        payload.get("measurement"),
        metric=run.metric,
        floor_ns=floor,
        elapsed_s=sanity.elapsed_seconds(payload.get("startedAt"), payload.get("finishedAt")),
        memory_bytes=memory,
    )
    return "the figures are not physically possible: " + "; ".join(problems) if problems else ""


def _why_stale(job: RerunJob, payload: dict) -> str:
    finished = _parse_time(payload.get("finishedAt"))
    if finished is None:
        return "finishedAt is missing or has no time zone"
    skew = timedelta(seconds=settings.RERUN_CLOCK_SKEW)
    if finished > timezone.now() + skew:
        return f"finishedAt {payload['finishedAt']} is in the future"
    if finished < job.issued_at - skew:
        return f"finishedAt {payload['finishedAt']} is before the job was issued"
    if finished > job.issued_at + timedelta(seconds=settings.RERUN_RESULT_MAX_AGE):
        return (
            f"finishedAt {payload['finishedAt']} is more than "
            f"{settings.RERUN_RESULT_MAX_AGE} s after the job was issued"
        )
    return ""


# A verified result that carried no verdict when it was recorded (_record: the job failed with
# this prefix, no controlled run, no event); a later rule or a later rerun of the cell's
# reference implementation can decide it.
NO_VERDICT = "no verdict: "


def _record(
    job: RerunJob,
    payload: dict,
    canonical: bytes,
    sig: dict,
    context: dict,
    gpu_spec,
    recorder: ResultRecorder,
) -> ResultReceipt:
    """Record a verified result for the locked `job`: the receipt, and for a result that can
    carry a verdict the controlled run and the one evidence application."""
    receipt_fields = {
        "job": job,
        "key_id": sig["keyId"],
        "signature": sig["value"].lower(),
        "payload_digest": context["digest"],
        "payload": payload,
        "status": str(payload.get("status") or ""),
        "device": str(payload.get("device") or ""),
        "via": context["via"],
    }
    status = payload.get("status")
    passed = (payload.get("correctness") or {}).get("passed")
    # A runner that could not run the job (unavailable, invalid, error) says nothing about
    # the run: the job fails with its error, and the evidence stays.
    if status not in ("ok", "incorrect") or not isinstance(passed, bool):
        error = f"the runner reported {status!r}: {payload.get('error') or 'no error text'}"
        return _failed(job, receipt_fields, error)
    try:
        outcome = _outcome(job, payload, passed, gpu_spec)
    except NoVerdict as exc:
        # Verified, but it cannot carry a verdict (throttled clocks, disagreeing repeats...):
        # the job fails with the reason and no level moves; the run can be re-run.
        return _failed(job, receipt_fields, f"{NO_VERDICT}{exc}")
    controlled_run = None
    if gpu_spec is not None:
        controlled_run = recorder.controlled_run(
            job=job, payload=payload, canonical=canonical, gpu_spec=gpu_spec
        )
    event = evidence_apply(
        run=job.run,
        controlled_run=controlled_run,
        outcome=outcome,
        cause=f"rerun-job:{job.uuid}",
        cause_job=job.uuid,
    )
    receipt = ResultReceipt.objects.create(
        **receipt_fields, controlled_run=controlled_run, evidence_event=event
    )
    _succeeded(job, payload)
    return receipt


def _outcome(job: RerunJob, payload: dict, passed: bool, gpu_spec):
    """What the result says about the run it re-measured (runs.evidence's rule); NoVerdict
    when it can say nothing."""
    return outcome_decide(
        run=job.run,
        correctness_passed=passed,
        device=str(payload.get("device")),
        gpu_product=gpu_spec.product if gpu_spec else None,
        measurement=payload.get("measurement") or {},
        environment=payload.get("environment"),
        # Results of runners before process ids: each job counts as its own process.
        process=(payload.get("runner") or {}).get("process") or f"job:{job.uuid}",
        check_worst=_check_worst(payload),
        checks=(payload.get("correctness") or {}).get("checks"),
        dtype=((payload.get("workload") or {}).get("ran") or {}).get("dtype"),
        implementation=payload.get("implementation"),
    )


def _check_worst(payload: dict) -> float | None:
    """The largest error over its bound among the failed checks of a result (kirunner.check's
    worstRatio); None where one has none (a NaN, an Inf, a shape that did not match)."""
    failed = [
        c.get("worstRatio")
        for c in (payload.get("correctness") or {}).get("checks") or []
        if isinstance(c, dict) and c.get("passed") is False
    ]
    # A ratio that is not a finite number (a zero bound) reads as none: it is no narrow miss,
    # and the event's JSON could not hold it.
    if not failed or not all(isinstance(w, int | float) and math.isfinite(w) for w in failed):
        return None
    return float(max(failed))


def _undecided() -> Q:
    return Q(evidence_event__isnull=True, status__in=("ok", "incorrect"),
             job__error__startswith=NO_VERDICT)  # fmt: skip


def rejudge_candidates() -> list[int]:
    """The runs a rule change can move: those with a recorded verdict from a result whose
    check failed (the runner's criterion, judged by upstream's tolerance), those at
    `reproduced` or `not-reproduced` (the fidelity rule can withhold a timing or memory
    verdict), those the fidelity rule left `checked` (a newer fidelity table can give them
    their verdict), and those with a result that carried none. run_rejudge skips a run already
    re-judged by this rule and table."""
    recorded = ResultReceipt.objects.filter(evidence_event__isnull=False)
    failed = recorded.filter(payload__correctness__passed=False)
    settled = recorded.filter(job__run__evidence__in=(Evidence.REPRODUCED, Evidence.NOT_REPRODUCED))
    withheld = recorded.filter(
        job__run__evidence=Evidence.CHECKED, job__run__evidence_events__facts__has_key="fidelity"
    )
    undecided = ResultReceipt.objects.filter(_undecided())
    return sorted(
        set(failed.values_list("job__run_id", flat=True))
        | set(settled.values_list("job__run_id", flat=True))
        | set(withheld.values_list("job__run_id", flat=True))
        | set(undecided.values_list("job__run_id", flat=True))
    )


def _rejudged_by_this_rule(run: Run) -> bool:
    """The newest event is a re-judgement by this rule, gated (where it was) on the fidelity
    row the committed table holds now: a table committed since replays the run."""
    newest = run.evidence_events.order_by("-created_at", "-id").first()
    if newest is None or not newest.cause.startswith("rejudge:"):
        return False
    facts = newest.facts or {}
    if facts.get("ruleVersion") != RULE_VERSION:
        return False
    return "fidelity" not in facts or facts["fidelity"] == run_fidelity(run).facts()


def run_rejudge(*, run: Run) -> str:
    """Re-judge every recorded result of a run by the evidence rule as it stands now, from the
    figures the signed payloads recorded: a rule change (such as judging a failed check by
    upstream's own test tolerance) reaches results recorded before it only this way, never by
    an edit of the level.

    1. Skip a run already re-judged by this rule (its newest event's cause is "rejudge:",
       its facts' ruleVersion runs.evidence.RULE_VERSION); an older rule's is replayed.
    2. Replay its results in the order they were recorded, from `reported`, as loading them
       again would: each result is decided again (outcome_decide reads the events written so
       far, so independent processes weigh each other as they did), and applied with
       evidence_apply as a new event (cause "rejudge:<job>"), the controlled run it became
       unchanged. A result that can carry no verdict now (NoVerdict) writes nothing. A result
       that carried none when recorded and carries one now gets what recording it would have
       given it: its controlled run, the event on its receipt, its job succeeded.
    3. Where no result carries a verdict any more, evidence_withdraw takes the run back to
       `reported`, with an event that says why; a run no result ever moved is left as it is.

    Returns "skipped", "withdrawn", "no verdict" or the level the run ends at.
    """
    if _rejudged_by_this_rule(run):
        return "skipped"
    receipts = (
        ResultReceipt.objects.filter(
            Q(job__run=run), Q(evidence_event__isnull=False) | _undecided()
        )
        .select_related("job", "controlled_run")
        .order_by("pk")
    )
    run = Run.objects.select_related(
        "implementation", "environment__gpu", "publication", "benchmark", "workload", "source"
    ).get(pk=run.pk)
    applied, last_none, recorder = 0, "", ResultRecorder()
    for receipt in receipts:
        try:
            _replay(run, receipt, first=applied == 0, recorder=recorder)
        except NoVerdict as exc:
            last_none = f"job {str(receipt.job.uuid)[:8]}: {exc}"
            continue
        applied += 1
    if applied == 0 and not any(r.evidence_event_id for r in receipts):
        return "no verdict"
    if applied == 0:
        last = receipts.last()
        evidence_withdraw(
            run=run,
            why=f"re-judged: no result carries a verdict now; {last_none}",
            cause=f"rejudge:{last.job.uuid}" if last else "rejudge:",
            cause_job=last.job.uuid if last else None,
        )
        return "withdrawn"
    return run.evidence


def _replay(run: Run, receipt: ResultReceipt, *, first: bool, recorder: ResultRecorder) -> None:
    """Decide one recorded result again and apply it (NoVerdict where it carries none now). A
    result that carried none when recorded gets what recording it would have given it."""
    job, payload = receipt.job, receipt.payload
    job.run = run
    gpu_spec = None
    if payload.get("device") == "cuda":
        gpu_spec = catalogue.GPUS.get((payload.get("environment") or {}).get("gpuName"))
    passed = (payload.get("correctness") or {}).get("passed")
    outcome = _outcome(job, payload, bool(passed), gpu_spec)
    controlled_run = receipt.controlled_run
    if receipt.evidence_event_id is None and gpu_spec is not None:
        controlled_run = recorder.controlled_run(
            job=job, payload=payload, canonical=canonicalize(payload), gpu_spec=gpu_spec
        )
    event = evidence_apply(
        run=run,
        controlled_run=controlled_run,
        outcome=outcome,
        cause=f"rejudge:{job.uuid}",
        cause_job=job.uuid,
        start=Evidence.REPORTED if first else None,
    )
    if receipt.evidence_event_id is None:
        ResultReceipt.objects.filter(pk=receipt.pk).update(
            controlled_run=controlled_run, evidence_event=event
        )
        _succeeded(job, payload)


def _failed(job: RerunJob, receipt_fields: dict, error: str) -> ResultReceipt:
    """Keep the receipt of a verified result that moves nothing, and fail the job with why.
    The locked `job` is kept equal to its row: the receipt's job says how it ended."""
    receipt = ResultReceipt.objects.create(**receipt_fields)
    done = {"state": JobState.FAILED, "finished_at": timezone.now(), "error": error[:4000]}
    RerunJob.objects.filter(pk=job.pk).update(**done)
    for name, value in done.items():
        setattr(job, name, value)
    return receipt


def _succeeded(job: RerunJob, payload: dict) -> None:
    # An offline job was never claimed by a worker: its start and end are the runner's own
    # (checked by _stale against its issue time), not the moment the file was imported.
    finished = (_parse_time(payload.get("finishedAt")) if job.offline else None) or timezone.now()
    done = {"state": JobState.SUCCEEDED, "finished_at": finished, "error": ""}
    started = _parse_time(payload.get("startedAt"))
    # The locked row's own start (a worker's claim) is kept; the runner's fills in a missing one.
    if started is not None and job.started_at is None:
        done["started_at"] = started
    RerunJob.objects.filter(pk=job.pk).update(**done)
    for name, value in done.items():
        setattr(job, name, value)


__all__ = [
    "ACTIVE_STATES",
    "NO_BROKER",
    "RerunError",
    "ResultRecorder",
    "ResultRejected",
    "broker_configured",
    "rerun_approve",
    "rerun_attempt_failed",
    "rerun_cancel",
    "rerun_claim",
    "rerun_dispatch",
    "rerun_heartbeat",
    "rerun_order_offline",
    "rerun_request",
    "rerun_sweep",
    "rejudge_candidates",
    "result_record",
    "run_rejudge",
]
