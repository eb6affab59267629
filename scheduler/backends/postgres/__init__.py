"""The PostgreSQL backend (``postgresql://``): pooled psycopg 3 connections, claims with
``FOR UPDATE SKIP LOCKED``, and enqueue inside the application's own transaction."""

from tickwork.scheduler.backends.postgres.backend import PostgresBackend

__all__ = ["PostgresBackend"]
