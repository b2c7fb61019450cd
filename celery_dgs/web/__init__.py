"""The status page of ``celery dgs web`` (optional extra ``celery-dgs[web]``).

:mod:`.app` the Starlette application, :mod:`.pages` and :mod:`.operator`
its routes (reading; signing in and acting), :mod:`.snapshot` the state read
once for the pages and :mod:`.cache` how often it is read, :mod:`.overview`
and :mod:`.views` what the pages show, :mod:`.templating` the HTML and its
headers, :mod:`.auth` the operator token and CSRF checks with
:mod:`.sessions` (held by the server) and :mod:`.throttle` (the sign-in
backoff), :mod:`.scrub` the secrets kept out of the page, :mod:`.hosts` the
``Host`` names it answers to, :mod:`.limits` the body limit, :mod:`.proxies`
the forwarded headers it believes and :mod:`.server` how uvicorn serves it
(timeouts, sizes). The click command is
:mod:`celery_dgs.cli.web`; the reads and actions are :mod:`celery_dgs.ops`'s.
"""
