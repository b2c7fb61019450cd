"""``celery dgs web``: the status page (optional extra ``celery-dgs[web]``).

:mod:`.command` is the click command (importable without the extra);
:mod:`.app` the Starlette application, :mod:`.views` what the pages show,
:mod:`.auth` the operator token and CSRF checks.
"""
