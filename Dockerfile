# syntax=docker/dockerfile:1
# dpstream worker image: multi-stage, slim, non-root.
#   docker build -t dpstream/dpstream:0.1.0 .
#   docker run --rm -e DPSTREAM_BROKER=kafka:9092 -e DPSTREAM_NOISE_KEY_FILE=/run/secrets/noise_key \
#       -v dpstream-state:/var/lib/dpstream dpstream/dpstream:0.1.0            # = dpstream worker
#   docker run --rm ... dpstream/dpstream:0.1.0 topics create                 # any other verb
ARG PYTHON_VERSION=3.11

# --- builder: wheels for dpstream and every dependency (compilers stay in this stage) ---------
FROM python:${PYTHON_VERSION}-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml constraints.txt README.md* ./
COPY app ./app
RUN pip wheel --wheel-dir /wheels -c constraints.txt .

# --- runtime ----------------------------------------------------------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
ARG DPSTREAM_UID=10001
LABEL org.opencontainers.image.title="dpstream" \
      org.opencontainers.image.description="Differentially private histograms of Kafka event streams under w-event privacy" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    DPSTREAM_TOPICS_DIR=/opt/dpstream/topics \
    DPSTREAM_STATE_DIR=/var/lib/dpstream \
    DPSTREAM_METRICS_PORT=9464 \
    DPSTREAM_METRICS_BIND=0.0.0.0
RUN groupadd --system --gid "${DPSTREAM_UID}" dpstream \
    && useradd --system --uid "${DPSTREAM_UID}" --gid dpstream --no-create-home \
       --home-dir /var/lib/dpstream --shell /usr/sbin/nologin dpstream
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels dpstream
# Topic specs (`dpstream topics create` reads them); the streams file comes from DPSTREAM_CONFIG.
COPY topics /opt/dpstream/topics
RUN mkdir -p /var/lib/dpstream /var/lib/dpstream-key \
    && chown dpstream:dpstream /var/lib/dpstream /var/lib/dpstream-key \
    && chmod 0700 /var/lib/dpstream-key
# /var/lib/dpstream-key: where docker-compose's one-shot `noise-key` service keeps the generated
# noise key (a named volume takes this directory's owner and mode on first use). No key is baked
# into the image: the worker refuses to start without DPSTREAM_NOISE_KEY(_FILE).
# RocksDB tables live here; the changelog topics can rebuild them, a volume makes restarts fast.
VOLUME ["/var/lib/dpstream"]
WORKDIR /var/lib/dpstream
USER ${DPSTREAM_UID}:${DPSTREAM_UID}
EXPOSE 9464
# /healthz is the worker's liveness endpoint; slim has no curl, so ask Python.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('DPSTREAM_METRICS_PORT', '9464'), timeout=4)"]
ENTRYPOINT ["dpstream"]
CMD ["worker"]
