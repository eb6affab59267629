"""tickwork, Oban for Python and procrastinate side by side on one local PostgreSQL."""
