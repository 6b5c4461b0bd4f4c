# The worker image used by docker-compose.yml and deploy/.
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY stream_app ./stream_app
RUN pip install --no-cache-dir . \
    && useradd --uid 10001 --create-home worker
USER worker

EXPOSE 6066
ENTRYPOINT ["stream-app"]
CMD ["worker"]
