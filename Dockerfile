# autopar API / worker image: `docker build -t autopar .`, then `docker run -p 8000:8000 autopar`
# (embedded SQLite in the /var/lib/autopar volume) or see docker-compose.yml for PostgreSQL.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/autopar
COPY . .
# Editable install: the Alembic scripts in migrations/ stay next to the app package, where
# `autopar serve` finds them (app/migrate.py); the wheel ships Python packages only.
RUN pip install -e . \
    && useradd --system --home-dir /var/lib/autopar --create-home autopar

USER autopar
ENV AUTOPAR_HOST=0.0.0.0 \
    AUTOPAR_PORT=8000 \
    AUTOPAR_DATABASE_URL=sqlite:////var/lib/autopar/autopar.db
VOLUME ["/var/lib/autopar"]
EXPOSE 8000

HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]

CMD ["autopar", "serve"]
