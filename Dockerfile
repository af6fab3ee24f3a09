# syntax=docker/dockerfile:1
# The consumer service: gunicorn's asyncio worker serving consumer.http.wsgi:asgi() (the Flask app behind a
# buffering bridge, docs/security.md), its timeouts derived from CONSUMER_*.
# Build: docker build -t consumer . (or: gcloud builds submit --tag REGION-docker.pkg.dev/...).
# Both stages use the same pinned Python so the virtualenv built in the first runs in the second.
ARG PYTHON_VERSION=3.11.14

# --- build: the full image has compilers, in case a dependency has no wheel for this platform.
FROM python:${PYTHON_VERSION}-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# The dependencies exactly as locked, every file checked against its hash (scripts/lock
# refreshes the lock); a layer that a source change does not invalidate.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY consumer ./consumer
# The package alone (--no-deps: nothing unlocked slips in), non-editable: the final stage copies
# the virtualenv only, never the source tree.
RUN pip install --no-cache-dir --no-deps . \
    && python -m compileall -q /opt/venv/lib

# --- runtime: slim, no compilers, no build tools, a fixed non-root user.
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="consumer" \
      org.opencontainers.image.description="Exactly-once event consumer behind Pub/Sub push"
RUN groupadd --system --gid 10001 consumer \
    && useradd --system --uid 10001 --gid consumer --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin consumer
COPY --from=build /opt/venv /opt/venv
# CONSUMER_BIND: inside the pod the load balancer reaches the container on its pod IP.
# PROMETHEUS_MULTIPROC_DIR: every worker writes its metrics there, /metrics sums them; /tmp is
# the only writable place (the Deployment mounts an emptyDir there, the root is read-only).
# CONSUMER_LOG_FORMAT: JSON lines for Cloud Logging, even with a terminal attached.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CONSUMER_BIND=0.0.0.0:8080 \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus \
    CONSUMER_LOG_FORMAT=json
WORKDIR /tmp
USER 10001:10001
EXPOSE 8080
# gunicorn is PID 1 and handles SIGTERM itself: it stops accepting and lets running requests
# finish for graceful_timeout (= the ack deadline). The migration Job overrides the command with
# `consumer db upgrade`; migrations never run in a serving pod's start-up.
ENTRYPOINT ["gunicorn", "--config", "python:consumer.http.gunicorn_conf"]
CMD ["consumer.http.wsgi:asgi()"]
