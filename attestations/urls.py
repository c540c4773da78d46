from django.urls import path

from attestations import api, views
from attestations.watching import views as watching

app_name = "attestations"

urlpatterns = [
    path("runs/<str:public_id>/attest/", views.attest, name="attest"),
    path("runs/<str:public_id>/report/", views.report, name="report"),
    path("attestations/<int:pk>/", views.attestation_detail, name="detail"),
    path("attestations/<int:pk>/edit/", views.attestation_edit, name="edit"),
    path("attestations/<int:pk>/withdraw/", views.attestation_withdraw, name="withdraw"),
    path("me/reports/", views.my_reports, name="my_reports"),
    path("me/tokens/", views.tokens, name="tokens"),
    path("me/tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
    path("users/<str:username>/", views.user_profile, name="profile"),
    path("me/watching/", watching.watching, name="watching"),
    path("me/watching/new/", watching.watch_new, name="watch_new"),
    path("me/watching/<int:pk>/stop/", watching.watch_stop, name="watch_stop"),
    path("watching/unsubscribe/<str:token>/", watching.unsubscribe, name="unsubscribe"),
]

# Mounted under /api/v1/ by kernelindex/urls.py.
api_urlpatterns = [
    path("attestations/", api.AttestationList.as_view(), name="attestation-list"),
    path("attestations/<int:pk>/", api.AttestationDetail.as_view(), name="attestation-detail"),
    path(
        "attestations/<int:pk>/withdraw/",
        api.AttestationWithdraw.as_view(),
        name="attestation-withdraw",
    ),
    path("reports/", api.ReportList.as_view(), name="report-list"),
]
