"""The operations the CLI (``celery dgs ...``) and the status page share.

:mod:`.env` the environment of one app (its settings, store and Redis
clients), :mod:`.errors` what an operation refuses, :mod:`.timetext` times
and durations as text; read models: :mod:`.state` (status rows, live workers
and leases), :mod:`.lookup` (a schedule by name), :mod:`.leases`,
:mod:`.runs`, :mod:`.checks` (deferred checks), :mod:`.leader` (the beat
leader); actions: :mod:`.actions` (run, pause, resume, cancel), each
returning what it changed as a value. Neither click nor a web framework is
imported here: each surface turns these values and errors into its output.
"""
