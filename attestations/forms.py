from __future__ import annotations

from decimal import Decimal

from allauth.account import forms as allauth_forms
from django import forms
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.core.validators import URLValidator

from attestations.models import Attestation, Kind, ReportCategory
from attestations.services import Measurement
from attestations.units import LABELS, to_stored, units_for
from runs.models import Gpu, Run


def _value_field(label: str) -> forms.DecimalField:
    return forms.DecimalField(
        label=label, required=False, min_value=Decimal(0), max_digits=24, decimal_places=6
    )


class AttestationForm(forms.Form):
    """Add or edit a reproduction or note. Values are typed in a unit of the author's choice and
    stored in the run's own unit."""

    # Hidden while "Note" is chosen (a stylesheet rule, no script): a note is text only.
    reproduction_only = (
        "result_file", "median", "p20", "p80", "input_unit", "gpu", "driver_version", "cuda_version",
        "torch_version", "other_versions", "harness", "commit_url",
    )  # fmt: skip

    kind = forms.ChoiceField(choices=Kind.choices, initial=Kind.REPRODUCTION)
    result_file = forms.FileField(
        label="Result file (kirunner)",
        required=False,
        help_text="result.json from `kirunner run` on this run's job file: its figures, GPU and "
        "versions are read from the file, so leave the fields below empty.",
    )
    median = _value_field("Measured median")
    p20 = _value_field("p20")
    p80 = _value_field("p80")
    input_unit = forms.ChoiceField(label="Unit", initial="us", required=False)
    gpu = forms.ModelChoiceField(
        label="GPU", queryset=Gpu.objects.all(), required=False, empty_label="(choose)"
    )
    driver_version = forms.CharField(label="Driver version", max_length=64, required=False)
    cuda_version = forms.CharField(label="CUDA version", max_length=64, required=False)
    torch_version = forms.CharField(label="PyTorch version", max_length=64, required=False)
    other_versions = forms.CharField(
        label="Other versions", max_length=300, required=False, help_text="e.g. triton 3.3.1"
    )
    harness = forms.CharField(label="Harness", max_length=200, required=False)
    commit_url = forms.URLField(
        label="Commit link",
        max_length=500,
        required=False,
        validators=[URLValidator(schemes=["http", "https"])],
        assume_scheme="https",
    )
    body = forms.CharField(
        label="Text (markdown)",
        widget=forms.Textarea(attrs={"rows": 8}),
        max_length=settings.COMMUNITY_MAX_BODY_CHARS,
        required=False,
    )

    def __init__(self, *args, run: Run, instance: Attestation | None = None, **kwargs):
        self.run = run
        self.instance = instance
        units = units_for(run.unit)
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = _initial_from(instance, units)
        super().__init__(*args, **kwargs)
        self.fields["input_unit"].choices = [(u, LABELS[u]) for u in units]
        if run.unit == "B":
            self.fields["input_unit"].initial = "MiB"
        if instance is not None:
            # The kind of an existing item is fixed; only its content is edited.
            del self.fields["kind"]
            del self.fields["result_file"]

    def clean(self):
        data = super().clean()
        kind = self.instance.kind if self.instance else data.get("kind")
        if data.get("result_file"):
            typed = [n for n in self.reproduction_only[1:] if n != "input_unit" and data.get(n)]
            if kind != Kind.REPRODUCTION:
                self.add_error("result_file", "A result file makes a reproduction, not a note.")
            elif typed:
                self.add_error(
                    "result_file",
                    "Give a result file or typed figures, not both: the file's own are used.",
                )
            return data
        if kind == Kind.REPRODUCTION and data.get("median") is None:
            self.add_error("median", "A reproduction needs a measured median.")
        if kind == Kind.REPRODUCTION and not data.get("input_unit"):
            self.add_error("input_unit", "Choose the unit of the values.")
        if kind == Kind.NOTE and not (data.get("body") or "").strip():
            self.add_error("body", "A note needs text.")
        return data

    def _to_base(self, value: Decimal | None) -> int | None:
        return to_stored(value, self.cleaned_data["input_unit"], self.run.unit)

    def measurement(self) -> Measurement:
        kind = self.instance.kind if self.instance else self.cleaned_data["kind"]
        if kind == Kind.NOTE:
            return Measurement()
        return Measurement(
            median=self._to_base(self.cleaned_data["median"]),
            p20=self._to_base(self.cleaned_data["p20"]),
            p80=self._to_base(self.cleaned_data["p80"]),
            unit=self.run.unit,
        )

    def details(self) -> dict:
        names = (
            "gpu", "driver_version", "cuda_version", "torch_version", "other_versions",
            "harness", "commit_url", "body",
        )  # fmt: skip
        return {name: self.cleaned_data[name] for name in names}


def _initial_from(item: Attestation, units: dict[str, int]) -> dict:
    # Show stored values in the largest unit that keeps them at or above 1.
    unit = next(
        (u for u, f in sorted(units.items(), key=lambda kv: -kv[1]) if (item.median or 0) >= f),
        next(iter(units)),
    )
    factor = Decimal(units[unit])

    def show(v):
        return None if v is None else (Decimal(v) / factor).normalize()

    return {
        "median": show(item.median),
        "p20": show(item.p20),
        "p80": show(item.p80),
        "input_unit": unit,
        **{
            name: getattr(item, name)
            for name in (
                "gpu", "driver_version", "cuda_version", "torch_version", "other_versions",
                "harness", "commit_url", "body",
            )
        },
    }  # fmt: skip


class ReportForm(forms.Form):
    category = forms.ChoiceField(choices=ReportCategory.choices)
    text = forms.CharField(
        label="What is wrong?",
        widget=forms.Textarea(attrs={"rows": 6}),
        max_length=settings.COMMUNITY_MAX_BODY_CHARS,
    )


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What will use it, e.g. 'lab CI'")


class ModerationForm(forms.Form):
    """The admin's intermediate page for bulk approve, reject and hide."""

    reason = forms.CharField(
        max_length=500,
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Required to reject or hide; shown to the author.",
    )


class BanForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.Textarea(attrs={"rows": 3}))


class SignupForm(allauth_forms.SignupForm):
    """allauth's sign-up, with the same work on both paths.

    With ACCOUNT_PREVENT_ENUMERATION a taken address gets an email instead of an account, but
    only the new account paid for hashing the password: the answer came ten times faster and
    told whether the address had an account. Both paths now hash the password once.
    """

    def try_save(self, request):
        if self.account_already_exists:
            make_password(self.cleaned_data.get("password1") or "")
        return super().try_save(request)
