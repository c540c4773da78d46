"""REST endpoints for community writes. They validate shape with serializers and call the
same services as the pages; rules live in the services only."""

from __future__ import annotations

import re

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
)
from rest_framework import exceptions, generics, permissions, serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from attestations import measured, ratelimit, services
from attestations.models import Attestation, Kind, Report, ReportCategory
from attestations.units import ALL_UNITS, to_stored
from runs.models import Gpu, Run


class NewestFirst(CursorPagination):
    ordering = ("-created_at", "-pk")
    page_size = 50


class Unprocessable(exceptions.ValidationError):
    """Input the schema allows that breaks a rule it cannot state (a reproduction without a
    median, p20 above the median, a unit of the other metric): 422, so a 400 always means the
    request did not match the schema."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY


def _service_call(fn, **kwargs):
    """Map the services' refusals onto HTTP answers."""
    try:
        return fn(**kwargs)
    except DjangoValidationError as exc:
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        raise Unprocessable(detail) from None
    except services.WrongState as exc:
        raise Conflict(str(exc)) from None
    except services.NotAllowed as exc:
        raise exceptions.PermissionDenied(str(exc)) from None


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The item's state does not allow this."


def _throttle(request, kind: str) -> None:
    if not ratelimit.consume(request, kind):
        raise exceptions.Throttled(detail=ratelimit.message(kind))


class AttestationSerializer(serializers.ModelSerializer):
    run = serializers.CharField(source="run.public_id", read_only=True)
    author = serializers.CharField(source="author.username", read_only=True)
    gpu = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    # Empty when none was given, so a string rather than a `uri` that must be a link.
    commit_url = serializers.CharField(read_only=True, help_text="An http(s) link, or empty")
    delta_percent = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="Measured median vs the published one, in %; null unless measured on the "
        "run's GPU product (not_comparable says why)",
    )
    not_comparable = serializers.CharField(
        read_only=True, help_text="Why the median is not compared with the published one, or empty"
    )
    measured = serializers.BooleanField(
        source="is_measured",
        read_only=True,
        help_text="True: figures read from an uploaded kirunner result file; false: typed in",
    )

    class Meta:
        model = Attestation
        fields = [
            "id", "run", "kind", "state", "author", "median", "p20", "p80", "unit",
            "delta_percent", "not_comparable", "gpu", "driver_version", "cuda_version",
            "torch_version", "other_versions", "harness", "commit_url", "body", "measured",
            "runner_version", "device", "device_ns", "classification", "result_digest",
            "moderation_reason", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields


PUBLIC_ID = "^[0-9a-f]{8}$"


class CheckedSlugField(serializers.SlugRelatedField):
    """A related object by a slug. The text is checked before it reaches the database (a NUL
    byte or an overlong value is a 400 here, where PostgreSQL would raise; form-encoded bodies
    do not pass through the JSON parser's check); a well-formed slug that names nothing is a
    404 naming the field, as the object's own URL would answer."""

    pattern: str | None = None

    def to_internal_value(self, data):
        bad = not isinstance(data, str) or "\x00" in data or len(data) > 100
        if bad or (self.pattern and not re.fullmatch(self.pattern, data)):
            self.fail("does_not_exist", slug_name=self.slug_field, value=str(data)[:64])
        try:
            return self.get_queryset().get(**{self.slug_field: data})
        except ObjectDoesNotExist:
            raise exceptions.NotFound(
                {self.field_name: [f"Nothing has the id {data!r}."]}
            ) from None


@extend_schema_field({"type": "string", "pattern": PUBLIC_ID, "example": "8827e3bb"})
class PublicRunField(CheckedSlugField):
    """A current run by its public id."""

    pattern = PUBLIC_ID

    def __init__(self, **kwargs):
        super().__init__(slug_field="public_id", queryset=Run.objects.public(), **kwargs)


# A measured value as text: the schema's pattern is within the field's bounds (not negative,
# 18 digits, 6 places), so every value the schema allows is accepted (the field also reads a
# JSON number, as before).
MEASURED = {"type": "string", "pattern": r"^\d{1,18}(\.\d{1,6})?$", "nullable": True}
# An http(s) link with a host (the validator below), or empty.
HTTP_LINK = r"^(https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?([/?#][!-~]*)?)?$"


@extend_schema_field(MEASURED)
class MeasuredField(serializers.DecimalField):
    def __init__(self, **kwargs):
        super().__init__(
            max_digits=24, decimal_places=6, min_value=0, required=False, allow_null=True
        )


@extend_schema_field({"type": "string", "pattern": HTTP_LINK, "maxLength": 500})
class HttpLinkField(serializers.CharField):
    def __init__(self, **kwargs):
        super().__init__(max_length=500, required=False)

    def run_validation(self, data=serializers.empty):
        # Empty means "no link"; the pattern allows it (allow_blank would add a schema
        # alternative that "" also matches, which oneOf forbids).
        return "" if data == "" else super().run_validation(data)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value and not re.fullmatch(HTTP_LINK, value):
            raise serializers.ValidationError("An http(s) link with a host name, or empty.")
        return value


class RejectUnknownFields:
    """A body field the endpoint does not know is a 400 naming it, as an unknown query
    parameter is: a typo ("medain") must not be dropped in silence. The schema says so
    (additionalProperties: false)."""

    def to_internal_value(self, data):
        known = {name for name, field in self.fields.items() if not field.read_only}
        unknown = sorted(str(key)[:40] for key in getattr(data, "keys", list)() if key not in known)
        if unknown:
            raise serializers.ValidationError(
                {
                    "body": [
                        f"Unknown field(s): {', '.join(unknown)}. Known: {', '.join(sorted(known))}."
                    ]
                }
            )
        return super().to_internal_value(data)


class _MeasuredInput(RejectUnknownFields, serializers.Serializer):
    median = MeasuredField()
    p20 = MeasuredField()
    p80 = MeasuredField()
    input_unit = serializers.ChoiceField(
        choices=ALL_UNITS, required=False, help_text="Unit of median/p20/p80 as sent"
    )
    gpu = CheckedSlugField(
        slug_field="slug", queryset=Gpu.objects.all(), required=False, allow_null=True
    )
    driver_version = serializers.CharField(max_length=64, required=False, allow_blank=True)
    cuda_version = serializers.CharField(max_length=64, required=False, allow_blank=True)
    torch_version = serializers.CharField(max_length=64, required=False, allow_blank=True)
    other_versions = serializers.CharField(max_length=300, required=False, allow_blank=True)
    harness = serializers.CharField(max_length=200, required=False, allow_blank=True)
    commit_url = HttpLinkField()
    body = serializers.CharField(max_length=20_000, required=False, allow_blank=True)


class AttestationCreateSerializer(_MeasuredInput):
    run = PublicRunField()
    kind = serializers.ChoiceField(choices=Kind.choices)
    result_file = serializers.FileField(
        required=False,
        help_text="A measured reproduction: result.json of `kirunner run` on the run's job "
        "file (multipart/form-data). Its figures, GPU and versions are read from the file.",
    )


class AttestationUpdateSerializer(_MeasuredInput):
    pass


class ReportSerializer(RejectUnknownFields, serializers.ModelSerializer):
    run = PublicRunField()
    category = serializers.ChoiceField(choices=ReportCategory.choices)
    text = serializers.CharField(max_length=20_000)

    class Meta:
        model = Report
        fields = ["id", "run", "category", "text", "state", "answer", "created_at", "updated_at"]
        read_only_fields = ["id", "state", "answer", "created_at", "updated_at"]


_DETAIL_FIELDS = (
    "gpu", "driver_version", "cuda_version", "torch_version", "other_versions", "harness",
    "commit_url", "body",
)  # fmt: skip


def _measurement(data: dict, run: Run, *, partial: bool) -> services.Measurement | None:
    """The measurement in the run's unit; None on a partial update that sends no values."""
    sent = [name for name in ("median", "p20", "p80") if name in data]
    if partial and not sent:
        return None
    if not any(data.get(name) is not None for name in ("median", "p20", "p80")):
        return services.Measurement()
    unit = data.get("input_unit") or run.unit
    try:
        values = {
            name: to_stored(data.get(name), unit, run.unit) for name in ("median", "p20", "p80")
        }
    except ValueError as exc:
        raise Unprocessable({"input_unit": [str(exc)]}) from None
    return services.Measurement(**values, unit=run.unit)


class AttestationList(generics.ListAPIView):
    """Approved attestations, plus your own pending ones; filter with ?run=<public id>."""

    serializer_class = AttestationSerializer
    pagination_class = NewestFirst
    permission_classes = [permissions.AllowAny]
    filter_backends: list = []

    def get_queryset(self):
        qs = Attestation.objects.visible_to(self.request.user).with_related()
        run = self.request.query_params.get("run")
        if run:
            qs = qs.filter(run__public_id=run)
        return qs

    @extend_schema(
        summary="List reproductions and notes",
        description="Approved reproductions and notes, newest first, plus your own pending "
        "ones when you send a token. Filter with run=<public id>.",
        parameters=[OpenApiParameter("run", str, description="A run's public id, e.g. 8827e3bb")],
        responses=AttestationSerializer(many=True),
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Add a reproduction or note",
        description="Needs the header Authorization: Bearer <token> (create one at /me/tokens/). A "
        "reproduction needs a median and the unit it is given in; a note needs a body "
        "(markdown). The item starts pending until a maintainer approves it.",
        request=AttestationCreateSerializer,
        responses={201: AttestationSerializer},
        examples=[
            OpenApiExample(
                "A reproduction",
                request_only=True,
                value={"run": "8827e3bb", "kind": "reproduction", "median": "393.632",
                       "input_unit": "us", "gpu": "nvidia-h100-80gb-hbm3",
                       "torch_version": "2.7.1", "body": "Same script, CUDA 12.8."},
            ),
            OpenApiExample(
                "A note",
                request_only=True,
                value={"run": "8827e3bb", "kind": "note", "body": "Measured with `--warmup 50`."},
            ),
        ],
    )  # fmt: skip
    def post(self, request):
        if not request.user.is_authenticated:
            raise exceptions.NotAuthenticated()
        _throttle(request, "attestation")
        incoming = AttestationCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        run = data["run"]
        if data.get("result_file") is not None:
            item = _from_result_file(request, data)
            return Response(AttestationSerializer(item).data, status=status.HTTP_201_CREATED)
        item = _service_call(
            services.attestation_create,
            run=run,
            author=request.user,
            kind=data["kind"],
            measurement=_measurement(data, run, partial=False),
            **{name: data[name] for name in _DETAIL_FIELDS if data.get(name) is not None},
        )
        return Response(AttestationSerializer(item).data, status=status.HTTP_201_CREATED)


def _from_result_file(request, data: dict) -> Attestation:
    typed = [name for name in ("median", "p20", "p80", *_DETAIL_FIELDS[:-1]) if data.get(name)]
    if data["kind"] != Kind.REPRODUCTION or typed:
        raise exceptions.ValidationError(
            {"result_file": ["A result file makes a reproduction on its own: send kind "
                             "reproduction, no typed figures, GPU or versions (a body is fine)."]}
        )  # fmt: skip
    document = _service_call(measured.from_upload, upload=data["result_file"])
    return _service_call(
        services.reproduction_from_result,
        run=data["run"],
        author=request.user,
        document=document,
        body=data.get("body") or "",
    )


class _AttestationItem(APIView):
    permission_classes = [permissions.AllowAny]

    def _visible(self, request, pk: int) -> Attestation:
        return get_object_or_404(
            Attestation.objects.readable_by(request.user).with_related(), pk=pk
        )

    def _own(self, request, pk: int) -> Attestation:
        if not request.user.is_authenticated:
            raise exceptions.NotAuthenticated()
        return get_object_or_404(Attestation.objects.with_related(), pk=pk, author=request.user)


class AttestationDetail(_AttestationItem):
    @extend_schema(
        summary="Get one reproduction or note",
        description="An approved item, or your own in any state.",
        responses=AttestationSerializer,
    )
    def get(self, request, pk: int):
        return Response(AttestationSerializer(self._visible(request, pk)).data)

    @extend_schema(
        summary="Edit your reproduction or note",
        description="Send only the fields that change. An edit of an approved item sends it "
        "back to moderation.",
        request=AttestationUpdateSerializer,
        responses=AttestationSerializer,
        examples=[
            OpenApiExample(
                "Correct the median",
                request_only=True,
                value={"median": "391.2", "input_unit": "us"},
            )
        ],
    )
    def patch(self, request, pk: int):
        item = self._own(request, pk)
        _throttle(request, "attestation")
        incoming = AttestationUpdateSerializer(data=request.data, partial=True)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        item = _service_call(
            services.attestation_update,
            attestation=item,
            editor=request.user,
            measurement=_measurement(data, item.run, partial=True),
            **{name: data[name] for name in _DETAIL_FIELDS if name in data},
        )
        return Response(AttestationSerializer(item).data)


class AttestationWithdraw(_AttestationItem):
    """An action: POST only (GET and PATCH here would read and edit the item under another URL)."""

    @extend_schema(
        summary="Withdraw your reproduction or note",
        description="No request body. The item stops being shown; its audit trail stays.",
        request=None,
        responses=AttestationSerializer,
    )
    def post(self, request, pk: int):
        item = self._own(request, pk)
        _throttle(request, "attestation")
        item = _service_call(services.attestation_withdraw, attestation=item, user=request.user)
        return Response(AttestationSerializer(item).data)


@extend_schema(
    methods=["GET"],
    summary="List your reports",
    description="Your own reports and their answers, newest first. Needs a token.",
)
class ReportList(generics.ListAPIView):
    """Your own reports and their answers; POST raises a new one."""

    serializer_class = ReportSerializer
    pagination_class = NewestFirst
    permission_classes = [permissions.IsAuthenticated]
    filter_backends: list = []

    def get_queryset(self):
        return Report.objects.by(self.request.user).select_related("run")

    @extend_schema(
        summary="Report a problem with a run",
        description="Needs a token. A maintainer answers; follow it here or at /me/reports/.",
        request=ReportSerializer,
        responses={201: ReportSerializer},
        examples=[
            OpenApiExample(
                "A wrong value",
                request_only=True,
                value={"run": "8827e3bb", "category": "wrong_data",
                       "text": "The median is 10x the other GPUs' for this size."},
            )
        ],
    )  # fmt: skip
    def post(self, request):
        _throttle(request, "report")
        incoming = ReportSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        report = _service_call(
            services.report_create,
            run=data["run"],
            reporter=request.user,
            category=data["category"],
            text=data["text"],
        )
        return Response(ReportSerializer(report).data, status=status.HTTP_201_CREATED)
