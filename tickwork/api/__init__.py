"""The HTTP API (``/api/v1``, JSON) over an ``App``, and what it shares with the
dashboard's pages: who may do what (``roles``), who is signed in (``users``: a users file
of hashed passwords and tokens), the guards (``security``: a token and a CSRF cookie, or
a host application's own checks) and the security headers with the request body bound
(``hardening``).

``app.create_api`` builds the API (the dashboard mounts it at ``/api/v1``); ``models``
is what it takes and gives, ``endpoints`` the table of endpoints, ``routes`` their
handlers (each calling one service of the app), ``plumbing`` the guard, the body checks
and the error shape, and ``openapi`` its OpenAPI document. Nothing here imports the
dashboard: the pages sit on top of it."""
