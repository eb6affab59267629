from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path
from shop import views

urlpatterns = [
    path("orders/", views.place_order),
    path("orders/<int:order_id>/", views.order_status),
    path("accounts/login/", auth_views.LoginView.as_view()),
    path("tickwork/", include("tickwork.django.urls")),  # the dashboard, for staff
]
