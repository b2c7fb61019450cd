"""Worker side: the run wrapper, its heartbeat, and the Celery signal hooks."""
