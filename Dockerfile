# The image docker-compose.yml runs: celery-dgs installed once, at build time,
# from its wheel (with the PostgreSQL driver), and the example project beside it.
# Containers start straight into celery: nothing is installed or written at start.
#   docker compose up --build
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY celery_dgs ./celery_dgs
RUN pip wheel --no-cache-dir --disable-pip-version-check --no-deps --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim
ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN set -eu; \
    wheel="$(ls /wheels/celery_dgs-*.whl)"; \
    pip install --no-cache-dir "${wheel}[postgres]"; \
    rm -rf /wheels; \
    useradd --create-home --uid 10001 dgs; \
    install -d -o dgs -g dgs /app
WORKDIR /app
# Not installed: celery finds it in the working directory (-A example_project.proj).
COPY --chown=dgs:dgs example_project ./example_project
USER dgs
# Beat's Prometheus endpoint (dgs_metrics_port; docker-compose.yml sets 9808).
EXPOSE 9808
CMD ["celery", "-A", "example_project.proj", "worker", "-l", "INFO"]
