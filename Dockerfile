# The worker image used by docker-compose.yml and deploy/.
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY stream_app ./stream_app
RUN pip install --no-cache-dir . \
    && useradd --uid 10001 --create-home worker \
    && mkdir /data && chown worker /data
USER worker
# The RocksDB table store: keep it on a volume, so a restarted worker reopens its state.
ENV STREAM_APP_DATA_DIR=/data
VOLUME /data

EXPOSE 6066
ENTRYPOINT ["stream-app"]
CMD ["worker"]
