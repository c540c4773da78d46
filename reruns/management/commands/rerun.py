"""Reruns from the command line, for GPU hosts without access to the broker.

    manage.py rerun order <public-id> [--gpu-class h200]    an approved offline job; prints its uuid
    manage.py rerun export <job-uuid> [--out JOB.json]      the job file the runner reads
    manage.py rerun import <RESULT.json>                    verify and record a signed result
    manage.py rerun load-demo <folder>                      jobs + results + worker-key.json
    manage.py rerun rejudge                                 re-judge runs a rule change can move

On the GPU host: python -m kirunner JOB.json --out RESULT.json --sign, with
KERNELINDEX_WORKER_KEY_ID and KERNELINDEX_WORKER_KEY set to a key the server holds in
KERNELINDEX_WORKER_KEYS.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils.dateparse import parse_datetime

from kilib import jsonbounds
from kirunner.sign import parse_key
from reruns.controlled import job_document
from reruns.models import JobState, RerunJob
from reruns.services import (
    RUN_RELATED,
    RerunError,
    ResultRecorder,
    ResultRejected,
    rejudge_candidates,
    rerun_order_offline,
    result_record,
    run_rejudge,
)
from runs.models import Run


def _read_json(path: str) -> dict:
    try:
        # Bounded: a result nested 100,000 deep or with a NaN is refused, not a traceback.
        data = jsonbounds.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:  # JSONDecodeError and JSONLimitError are ValueErrors
        raise CommandError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise CommandError(f"{path}: expected a JSON object")
    return data


def _job(job_ref: str) -> RerunJob:
    try:
        key = uuid.UUID(job_ref)
    except ValueError:
        raise CommandError(f"{job_ref!r} is not a job uuid") from None
    job = RerunJob.objects.select_related("run").filter(uuid=key).first()
    if job is None:
        raise CommandError(f"no rerun job {job_ref}")
    return job


def _demo_folder(root: Path) -> tuple[dict, dict, dict]:
    """A batch folder's key, its jobs and its primary results, each by job id."""
    key_file = root / "worker-key.json"
    if not key_file.exists():
        raise CommandError(f"{key_file}: missing (the demo key: keyId and secret)")
    key_doc = _read_json(str(key_file))
    if not isinstance(key_doc.get("keyId"), str) or not isinstance(key_doc.get("secret"), str):
        raise CommandError(f"{key_file}: needs string fields keyId and secret")
    keys = {key_doc["keyId"]: parse_key(key_doc["secret"])}
    jobs, results = {}, {}
    # Jobs and primary results only: a batch folder may also keep repeated runs of the
    # same jobs (for their spread) under repeats/, which are data, not results to record.
    candidates = [*root.glob("*.json"), *root.glob("jobs/*.json"), *root.glob("results/*.json")]
    for path in sorted(candidates):
        if path == key_file:
            continue
        doc = _read_json(str(path))
        if doc.get("kind") == "RerunJob":
            jobs[str((doc.get("job") or {}).get("id"))] = (path, doc)
        elif doc.get("kind") == "RerunResult":
            job_id = str(((doc.get("payload") or {}).get("job") or {}).get("id"))
            results[job_id] = (path, doc)
    return keys, jobs, results


def _reference_first(item) -> tuple[bool, str]:
    """Job order of a load: the reference implementations' jobs (every provider not Liger's)
    before Liger's, so that a Liger result whose check failed is judged with the reference's
    own error on the cell at hand (runs.evidence_correctness); then by job id."""
    job_id, (_path, doc) = item
    return str(doc.get("provider") or "").startswith("liger"), job_id


class Command(BaseCommand):
    help = "Order, export, import and load controlled reruns (offline GPU hosts, demo data)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        order = sub.add_parser("order", help="create an approved offline job for a run")
        order.add_argument("public_id")
        order.add_argument("--gpu-class", default=None)
        export = sub.add_parser("export", help="write a job's JOB.json")
        export.add_argument("job")
        export.add_argument("--out", default=None, help="file to write (default: stdout)")
        imp = sub.add_parser("import", help="verify and record a signed RESULT.json")
        imp.add_argument("result")
        demo = sub.add_parser("load-demo", help="load a folder of jobs, results and its key")
        demo.add_argument("folder")
        sub.add_parser(
            "rejudge",
            help="re-judge every run with a recorded result whose check failed, at "
            "reproduced or not-reproduced, or left checked by the fidelity table, by the rule "
            "and table as they stand (upstream's own test tolerance, the fidelity table), "
            "from the signed figures",
        )

    def handle(self, *args, action: str, **options):
        getattr(self, "handle_" + action.replace("-", "_"))(**options)

    def handle_order(self, *, public_id: str, gpu_class: str | None, **_):
        run = Run.objects.public().filter(public_id=public_id).first()
        if run is None:
            raise CommandError(f"no run {public_id}")
        try:
            job = rerun_order_offline(run=run, gpu_class=gpu_class)
        except RerunError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(str(job.uuid))

    def handle_export(self, *, job: str, out: str | None, **_):
        rerun = _job(job)
        if rerun.state not in (JobState.QUEUED, JobState.RUNNING) or rerun.issued_at is None:
            raise CommandError(f"job {rerun.uuid} is {rerun.state}; only approved jobs export")
        text = json.dumps(job_document(rerun), indent=2) + "\n"
        if out:
            Path(out).write_text(text, encoding="utf-8")
            self.stderr.write(f"wrote {out}")
        else:
            self.stdout.write(text, ending="")

    def handle_import(self, *, result: str, **_):
        envelope = _read_json(result)
        try:
            receipt = result_record(envelope=envelope, via="import")
        except ResultRejected as exc:
            raise CommandError(f"{result}: rejected ({exc.reason}): {exc.detail}") from None
        self._report(receipt)

    def _report(self, receipt) -> None:
        # The receipt's job is the recorded row as it now stands (its state, its run).
        job = receipt.job
        line = f"job {job.uuid}: {job.state}, result {receipt.status} on {receipt.device}"
        if receipt.evidence_event:
            event = receipt.evidence_event
            line += f"; run {job.run.public_id} {event.from_level} -> {event.to_level}"
        if receipt.controlled_run:
            line += f"; controlled run {receipt.controlled_run.public_id}"
        self.stdout.write(line)

    def handle_rejudge(self, **_):
        counts: dict[str, int] = {}
        for run_id in rejudge_candidates():
            with transaction.atomic():
                done = run_rejudge(run=Run.objects.get(pk=run_id))
            counts[done] = counts.get(done, 0) + 1
        shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing to re-judge"
        self.stdout.write(f"runs re-judged: {shown}")

    def handle_load_demo(self, *, folder: str, **_):
        """Idempotent: a job already present is reused, a result already recorded skipped.

        The folder loads in one transaction: its existing jobs and the runs of its new ones
        are read with one query each, and its results are recorded by one
        services.ResultRecorder (every check of result_record, each result in a savepoint of
        its own), the reference implementations' jobs first (_reference_first). The first bad
        job file or rejected result ends the load with its file name; what came before it
        stays recorded, and a later load goes on from there. The demo's 15 folders (6,301
        results) load in 65-67 s on SQLite and 173 s on PostgreSQL on a 2-CPU host, 18.9 and
        18.0 queries a result (bench/demo_load.py; docs/performance.md, "Demo load")."""
        root = Path(folder)
        keys, jobs, results = _demo_folder(root)
        recorded = skipped = 0
        recorder = ResultRecorder(via="demo", keys=keys, rank_later=True)
        stop = None
        with transaction.atomic():
            known = _DemoRows(jobs.values())
            for job_id, (path, doc) in sorted(jobs.items(), key=_reference_first):
                try:
                    job = self._demo_job(path, doc, known)
                except CommandError as exc:
                    stop = exc
                    break
                if job.is_finished:
                    skipped += 1
                    continue
                if job_id not in results:
                    self.stderr.write(f"{path}: no result file for job {job_id}; left queued")
                    continue
                result_path, envelope = results[job_id]
                try:
                    receipt = recorder.record(envelope, job=job)
                except ResultRejected as exc:
                    # Leaves the transaction whole: the results before it and its rejection
                    # log entry are kept.
                    stop = CommandError(f"{result_path}: rejected ({exc.reason}): {exc.detail}")
                    break
                self._report(receipt)
                recorded += 1
            recorder.rank()
        if stop is not None:
            raise stop
        self.stdout.write(f"{root}: {recorded} result(s) recorded, {skipped} already present")

    def _demo_job(self, path: Path, doc: dict, known: _DemoRows) -> RerunJob:
        info, run_ref = doc.get("job") or {}, doc.get("run") or {}
        try:
            job_uuid = uuid.UUID(str(info.get("id")))
        except ValueError:
            raise CommandError(f"{path}: job.id is not a uuid") from None
        existing = known.jobs.get(job_uuid)
        if existing is not None:
            if existing.nonce != info.get("nonce"):
                raise CommandError(f"{path}: job {job_uuid} exists with another nonce")
            return existing
        run = known.runs.get((run_ref.get("source"), run_ref.get("externalId")))
        if run is None:
            raise CommandError(
                f"{path}: no current run {run_ref.get('source')}/{run_ref.get('externalId')}; "
                f"ingest the source first"
            )
        issued = parse_datetime(str(info.get("issuedAt") or ""))
        if issued is None or not isinstance(info.get("nonce"), str):
            raise CommandError(f"{path}: job.issuedAt and job.nonce are required")
        # In the folder's transaction (handle_load_demo), which a database error here rolls
        # back whole: a savepoint of its own would be two more round trips a job.
        return RerunJob.objects.create(
            uuid=job_uuid,
            nonce=info["nonce"],
            run=run,
            gpu_class=str(info.get("gpuClass") or run.environment.gpu.gpu_class),
            state=JobState.QUEUED,
            offline=True,
            issued_at=issued,
        )


class _DemoRows:
    """The rows a demo folder's job files name, read once for the folder: its jobs already
    present, by uuid, and the current runs its job files name, by (source, external id)."""

    def __init__(self, files):
        docs = [doc for _, doc in files]
        uuids = {_uuid_or_none((doc.get("job") or {}).get("id")) for doc in docs} - {None}
        self.jobs = {
            job.uuid: job
            for job in RerunJob.objects.filter(uuid__in=uuids).select_related(
                *(f"run__{name}" for name in RUN_RELATED)
            )
        }
        wanted: dict[str, set[str]] = {}
        for doc in docs:
            run_ref = doc.get("run") or {}
            if isinstance(run_ref.get("source"), str) and isinstance(
                run_ref.get("externalId"), str
            ):
                wanted.setdefault(run_ref["source"], set()).add(run_ref["externalId"])
        self.runs = {
            (run.source.slug, run.external_id): run
            for slug, external_ids in wanted.items()
            for run in Run.objects.public()
            .filter(source__slug=slug, external_id__in=external_ids)
            .select_related(*RUN_RELATED)
        }


def _uuid_or_none(value) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
