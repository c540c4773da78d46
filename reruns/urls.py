from django.urls import path

from reruns import views

app_name = "reruns"

urlpatterns = [
    path("runs/<str:public_id>/reruns/", views.request_rerun, name="request"),
]
