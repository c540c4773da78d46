"""The read API. Lists use cursor pagination; every malformed query is a 400 with a message
naming the parameter, never a silently ignored typo."""

from __future__ import annotations

import json
import re

from django.conf import settings
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_safe
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import OpenApiParameter, extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework import generics
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kilib.schema import ERRORS
from runs.api import serializers
from runs.api.base import StrictCursorPagination, StrictQueryMixin
from runs.models import Benchmark, ComparisonGroup, Environment, Run, Source, TimedPass
from runs.read import catalogue, exports
from runs.read.filters import RunFilter
from runs.read.freshness import DATA, cached, cached_many
from runs.read.page_cache import public_page

HEX64 = "^[0-9a-f]{64}$"  # a sha256 digest's hex digits, as _hex_digest checks them


def _runs():
    # The catalogue relations come from runs.read.catalogue (see AttachCatalogueMixin).
    return Run.objects.public().for_run_page()


class AttachCatalogueMixin:
    # Attach the catalogue rows to the runs about to be serialised.

    def get_serializer(self, *args, **kwargs):
        if args:
            catalogue.attach(args[0] if isinstance(args[0], list) else [args[0]])
        return super().get_serializer(*args, **kwargs)


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="List current runs",
    description="Current runs, newest import first. Filter with the same parameters as the /runs/ page (benchmark, implementation, gpu, timed_pass, metric, dtype, source, evidence, q) and sort with ordering. Follow the next link for the following page.",
)
class RunList(AttachCatalogueMixin, StrictQueryMixin, generics.ListAPIView):
    """Current runs, newest import first; filter with the same parameters as /runs/."""

    serializer_class = serializers.RunSerializer
    filterset_class = RunFilter
    pagination_class = StrictCursorPagination

    def get_queryset(self):
        return Run.objects.public()

    def list(self, request, *args, **kwargs):
        # The page's ids and sort keys first; each run as the list shows it reads the run data
        # only, kept under its version, and the runs not kept are loaded in one query.
        page = self.page_keys()
        shown = cached_many("api-run", [run["id"] for run in page], [DATA], self._represent)
        # A run deleted between the two queries is left out.
        return self.get_paginated_response([shown[r["id"]] for r in page if r["id"] in shown])

    def page_keys(self) -> list[dict]:
        """The page's runs as what the cursor needs, the id and the sort key, as plain values
        (decoding two timestamps per row cost more than the rest of the query). bench/explain.py
        explains this query."""
        rows = self.filter_queryset(self.get_queryset())  # validates `ordering` too
        ordering = self.paginator.get_ordering(self.request, rows, self)
        return self.paginate_queryset(rows.values(*{"id", ordering[0].lstrip("-")}))

    def _represent(self, ids: list[int]) -> dict[int, dict]:
        # Not limited to current runs: the page was current a moment ago. No spec, labels or
        # metrics in the list: their JSON stays undecoded.
        runs = list(Run.objects.filter(pk__in=ids).for_listing().select_related("group"))
        data = self.get_serializer(runs, many=True).data
        return {run.pk: one for run, one in zip(runs, data, strict=True)}


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="Get one run",
    description="One current run by its 8-character public id (as in /runs/<id>/), with its workload, implementation, protocol, environment, medians and evidence level.",
)
class RunDetail(AttachCatalogueMixin, StrictQueryMixin, generics.RetrieveAPIView):
    serializer_class = serializers.RunDetailSerializer
    lookup_field = "public_id"

    def get_queryset(self):
        return _runs()

    def retrieve(self, request, *args, **kwargs):
        # The representation reads the run data only: kept under its version. A miss (404)
        # is not kept, since a client can ask for any number of ids that do not exist.
        public_id = self.kwargs["public_id"]
        shown = cached(f"api-run-detail:{public_id}", [DATA], self._represent, keep=bool)
        if not shown:
            self.get_object()  # raises the 404 with its message
        return Response(shown)

    def _represent(self) -> dict | None:
        try:
            return dict(self.get_serializer(self.get_object()).data)
        except Http404:
            return None


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="Find a run by its upstream id",
    description="The current run that a source published under an external id, e.g. source=liger-kernel-bench and the CSV row's id.",
)
class RunLookup(StrictQueryMixin, APIView):
    """Find a run by its source and upstream external id."""

    extra_params = {"source", "external_id"}

    @extend_schema(
        parameters=[
            # Empty is refused as missing: the schema says so.
            OpenApiParameter("source", {"type": "string", "minLength": 1}, required=True),
            OpenApiParameter("external_id", {"type": "string", "minLength": 1}, required=True),
        ],
        responses=serializers.RunDetailSerializer,
    )
    def get(self, request: Request) -> Response:
        source = request.query_params.get("source", "")
        external_id = request.query_params.get("external_id", "")
        missing = [n for n, v in (("source", source), ("external_id", external_id)) if not v]
        if missing:
            raise ValidationError({n: "This parameter is required." for n in missing})
        run = _runs().filter(source__slug=source, external_id=external_id).first()
        if run is None:
            raise NotFound(f"No current run of source {source!r} has external id {external_id!r}.")
        catalogue.attach([run])
        return Response(serializers.RunDetailSerializer(run).data)


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="List benchmarks",
    description="Every benchmark (kernel) with the number of current runs.",
)
class BenchmarkList(StrictQueryMixin, generics.ListAPIView):
    serializer_class = serializers.BenchmarkSerializer
    pagination_class = StrictCursorPagination
    filter_backends: list = []

    def get_queryset(self):
        return Benchmark.objects.with_run_counts()


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="Get one benchmark",
    description="One benchmark by its upstream name, with the number of current runs.",
)
class BenchmarkDetail(StrictQueryMixin, generics.RetrieveAPIView):
    serializer_class = serializers.BenchmarkSerializer
    lookup_field = "slug"
    filter_backends: list = []

    def get_queryset(self):
        return Benchmark.objects.with_run_counts()


class GroupFilterMixin:
    extra_params = {"benchmark", "timed_pass", "metric"}

    def get_queryset(self):
        qs = ComparisonGroup.objects.select_related(
            "benchmark", "workload", "environment__gpu", "publication"
        )
        params = self.request.query_params
        if params.get("timed_pass") and params["timed_pass"] not in TimedPass.values:
            raise ValidationError({"timed_pass": f"One of: {', '.join(TimedPass.values)}."})
        if params.get("metric") and params["metric"] not in ("latency", "memory"):
            raise ValidationError({"metric": "One of: latency, memory."})
        if params.get("benchmark"):
            qs = qs.filter(benchmark__slug=params["benchmark"])
        for name in ("timed_pass", "metric"):
            if params.get(name):
                qs = qs.filter(**{name: params[name]})
        return qs


@method_decorator(public_page, name="dispatch")
@extend_schema(
    parameters=[
        OpenApiParameter("benchmark", str),
        OpenApiParameter("timed_pass", str, enum=TimedPass.values),
        OpenApiParameter("metric", str, enum=["latency", "memory"]),
    ]
)
@extend_schema(
    summary="List comparison groups",
    description="Comparison groups: runs of one benchmark, timed pass, metric, workload, GPU and protocol family in one publication, ranked against each other. Filter by benchmark, timed_pass and metric.",
)
class GroupList(GroupFilterMixin, StrictQueryMixin, generics.ListAPIView):
    """Comparison groups; each one's ranked runs are at its detail URL."""

    serializer_class = serializers.GroupSerializer
    pagination_class = StrictCursorPagination
    filter_backends: list = []


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="Get a comparison group with its ranked runs",
    description="One comparison group by the 64 hex digits of its key, with its runs in rank order.",
    parameters=[OpenApiParameter("key", str, OpenApiParameter.PATH, pattern=HEX64)],
)
class GroupDetail(StrictQueryMixin, generics.RetrieveAPIView):
    serializer_class = serializers.GroupDetailSerializer
    filter_backends: list = []

    def get_object(self):
        key = _hex_digest(self.kwargs["key"], "key", "A comparison key")
        ranked = Run.objects.public().select_related("implementation").ranked()
        group = (
            ComparisonGroup.objects.select_related(
                "benchmark", "workload", "environment__gpu", "publication"
            )
            .prefetch_related(Prefetch("runs", queryset=ranked, to_attr="ranked_runs"))
            .filter(key=f"sha256:{key}")
            .first()
        )
        if group is None:
            raise NotFound("No comparison group has this key.")
        return group


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="List sources",
    description="The upstream projects whose published results are imported, with their licenses.",
)
class SourceList(StrictQueryMixin, generics.ListAPIView):
    serializer_class = serializers.SourceSerializer
    queryset = Source.objects.order_by("slug")
    pagination_class = None
    filter_backends: list = []


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="Get one source", description="One source by its slug, e.g. liger-kernel-bench."
)
class SourceDetail(StrictQueryMixin, generics.RetrieveAPIView):
    serializer_class = serializers.SourceSerializer
    queryset = Source.objects.all()
    lookup_field = "slug"
    filter_backends: list = []


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="List environments",
    description="Hardware and software environments (GPU, driver, CUDA, PyTorch) that runs were measured in.",
)
class EnvironmentList(StrictQueryMixin, generics.ListAPIView):
    serializer_class = serializers.EnvironmentSerializer
    queryset = Environment.objects.select_related("gpu")
    pagination_class = StrictCursorPagination
    filter_backends: list = []


@method_decorator(public_page, name="dispatch")
@extend_schema(
    summary="Get one environment",
    description="One environment by the 64 hex digits of its digest.",
    parameters=[OpenApiParameter("digest", str, OpenApiParameter.PATH, pattern=HEX64)],
)
class EnvironmentDetail(StrictQueryMixin, generics.RetrieveAPIView):
    serializer_class = serializers.EnvironmentSerializer
    filter_backends: list = []

    def get_object(self):
        key = _hex_digest(self.kwargs["digest"], "digest", "An environment digest")
        env = Environment.objects.select_related("gpu").filter(digest=f"sha256:{key}").first()
        if env is None:
            raise NotFound("No environment has this digest.")
        return env


# Bulk export ---------------------------------------------------------------------------------


def _hex_digest(value: str, field: str, what: str) -> str:
    """The 64 hex digits of a sha256 digest in a URL, or a 400 that says what was expected."""
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ValidationError({field: f"{what} is 64 lowercase hex characters."})
    return value


def _export(request: HttpRequest, fmt: str, content_type: str):
    """One streamed part of an export, ending with a trailer (runs.read.exports): `end` when
    the set is complete, `partial` with the next part's URL when the part's time budget ran
    out first, so no part outlives the worker timeout and none ends silently cut short."""
    queryset, after, errors = exports.filtered(request.GET)
    if errors:
        return JsonResponse(errors, status=400)

    def next_url(last_id: int) -> str:
        params = request.GET.copy()
        params["after"] = str(last_id)
        return request.build_absolute_uri(f"{request.path}?{params.urlencode()}")

    body = exports.stream(
        fmt,
        exports.rows(queryset, after=after),
        budget=settings.EXPORT_STREAM_SECONDS,
        next_url=next_url,
    )
    response = StreamingHttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="kernelindex-runs.{fmt}"'
    return response


@require_safe
def export_csv(request: HttpRequest):
    return _export(request, "csv", "text/csv; charset=utf-8")


@require_safe
def export_jsonl(request: HttpRequest):
    return _export(request, "jsonl", "application/jsonl; charset=utf-8")


# Docs ----------------------------------------------------------------------------------------

_schema_cache: dict = {}


def _schema() -> dict:
    """The OpenAPI schema, generated once per process: it is a function of the code alone
    (the endpoints, their serializers and docstrings), and generating it took 333 ms, 0.017 of
    the trivial view a request at 1M runs (bench/scale.py at 6f8aceaa) where /schema/ made it
    anew each time."""
    if "schema" not in _schema_cache:
        _schema_cache["schema"] = SchemaGenerator().get_schema(request=None, public=True)
    return _schema_cache["schema"]


@method_decorator(public_page, name="dispatch")
class SchemaView(SpectacularAPIView):
    """drf-spectacular's schema view (YAML or JSON by content negotiation), serving _schema()."""

    def _get_schema_response(self, request):
        filename = self._get_filename(request, None)
        return Response(
            data=_schema(), headers={"Content-Disposition": f'inline; filename="{filename}"'}
        )


@require_safe
def api_root(request: HttpRequest) -> JsonResponse:
    """The API's front door: every endpoint with its methods and one-line summary, read from
    the OpenAPI schema, so an endpoint another app mounts under /api/v1/ is listed too."""
    endpoints = [
        {
            "path": path,
            "url": request.build_absolute_uri(path) if "{" not in path else None,
            "methods": sorted(m.upper() for m in methods),
            "summary": next(
                (op.get("summary", "") for op in methods.values() if op.get("summary")), ""
            ),
        }
        for path, methods in _schema()["paths"].items()
    ]
    return JsonResponse(
        {
            "name": "KernelIndex API",
            "version": "1",
            "docs": request.build_absolute_uri("/api/v1/docs/"),
            "schema": request.build_absolute_uri("/api/v1/schema/"),
            "endpoints": endpoints,
        },
        json_dumps_params={"indent": 2, "ensure_ascii": False},
    )


def _resolved(schema: dict, prop: dict) -> dict:
    """A property with its $ref (or the $ref inside allOf/oneOf, as the generator writes a
    nullable enum) replaced by the component it names; description and nullability kept."""
    target = prop
    for combinator in ("allOf", "oneOf", "anyOf"):
        refs = [p for p in prop.get(combinator, []) if "$ref" in p]
        if refs:
            target = refs[0]
            break
    if "$ref" not in target:
        return prop
    component = schema["components"]["schemas"][target["$ref"].rsplit("/", 1)[-1]]
    return {**component, **{k: v for k, v in prop.items() if k == "description"}}


def _component(schema: dict, ref: str) -> dict:
    return schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]


def _kind(prop: dict) -> str:
    """A property's type in words: "string (uri)", "array of Run", "string (uri) or empty"."""
    if "oneOf" in prop:
        kinds = [
            "empty" if option.get("maxLength") == 0 else _kind(option) for option in prop["oneOf"]
        ]
        return " or ".join(dict.fromkeys(kinds))
    if prop.get("type") == "array":
        items = prop.get("items", {})
        return f"array of {items['$ref'].rsplit('/', 1)[-1]}" if "$ref" in items else "array"
    kind = prop.get("type") or ("string" if "enum" in prop else "object")
    return f"{kind} ({prop['format']})" if prop.get("format") else kind


def _fields(schema: dict, body: dict, *, read: bool, prefix: str = "") -> list[dict]:
    """Rows for a body's properties; an array of objects is followed by its items' fields
    (`results[].public_id`), so a list response says what each element holds."""
    required = set(body.get("required", []))
    rows = []
    for name, prop in body.get("properties", {}).items():
        if not read and prop.get("readOnly"):
            continue
        prop = _resolved(schema, prop)
        rows.append(
            {
                "name": prefix + name,
                "type": _kind(prop),
                "enum": prop.get("enum"),
                "required": name in required and not read,
                "description": prop.get("description", ""),
            }
        )
        items = prop.get("items", {}) if prop.get("type") == "array" else {}
        if "$ref" in items and not prefix:
            item = _component(schema, items["$ref"])
            rows += _fields(schema, item, read=read, prefix=f"{prefix}{name}[].")
    return rows


def _body(schema: dict, content: dict | None, *, read: bool) -> dict:
    """A request or response body for the docs page: its fields (those a client sends, or
    those it receives) and its examples, with $refs resolved."""
    if not content:
        return {"fields": [], "examples": [], "many": False}
    media = content.get("application/json") or next(iter(content.values()))
    body = media.get("schema", {})
    many = body.get("type") == "array"
    if many:
        body = body.get("items", {})
    if "$ref" in body:
        body = _component(schema, body["$ref"])
    examples = [
        {"name": e.get("summary", name), "json": json.dumps(e.get("value"), indent=2)}
        for name, e in media.get("examples", {}).items()
    ]
    return {"fields": _fields(schema, body, read=read), "examples": examples, "many": many}


@require_safe
@public_page
def docs(request: HttpRequest):
    """A self-contained reference rendered from the OpenAPI schema: no external assets. Kept
    by the page cache like every public page (0.095 of the trivial view rendered each
    request, cached or not, at 1M runs: bench/scale.py at 6f8aceaa)."""
    schema = _schema()
    operations = []
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            # The answers every endpoint shares ($ref) are listed once, above.
            responses = [
                {"status": code, "description": r.get("description", ""),
                 **_body(schema, r.get("content"), read=True)}
                for code, r in op.get("responses", {}).items() if "$ref" not in r
            ]  # fmt: skip
            operations.append(
                {
                    "method": method.upper(),
                    "path": path,
                    "anchor": re.sub(r"[^a-z0-9]+", "-", f"{method} {path}".lower()).strip("-"),
                    "summary": op.get("summary", ""),
                    "description": op.get("description", ""),
                    "parameters": op.get("parameters", []),
                    "request": _body(schema, op.get("requestBody", {}).get("content"), read=False),
                    "responses": responses,
                }
            )
    shared = schema.get("components", {}).get("responses", {})
    errors = [
        {"status": code, "description": shared[name]["description"]}
        for code, (name, _) in ERRORS.items()
        if name in shared
    ]
    return render(
        request,
        "runs/api_docs.html",
        {"schema": schema, "operations": operations, "errors": errors},
    )
