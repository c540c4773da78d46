from __future__ import annotations

from django import forms

from attestations.watching.models import Watch


class WatchForm(forms.ModelForm):
    class Meta:
        model = Watch
        fields = list(Watch.EVENTS)
