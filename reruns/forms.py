from __future__ import annotations

from django import forms

from reruns.services import GPU_CLASSES


class RerunRequestForm(forms.Form):
    gpu_class = forms.ChoiceField(
        choices=[(c, c) for c in GPU_CLASSES], label="GPU class", required=False
    )
