from django.urls import path

from reruns import views

app_name = "reruns"

urlpatterns = [
    path("runs/<str:public_id>/reruns/", views.request_rerun, name="request"),
    path("runs/<str:public_id>/job.json", views.job_file, name="job_file"),
    # The runner's wheel, under the wheel's own file name: pip reads name and version from it.
    path("reproduce/<str:filename>", views.runner_archive, name="runner_archive"),
]
