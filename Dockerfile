# One image for the API, the queue workers, the queue monitor and Flower
# (target `app`, the default), plus the Locust load generator (target `load`).
# The services differ only by their command (see docker-compose.yml).
#
# uv is only needed to build the virtual environment: the runtime stages copy
# the environment alone, so uv and its cache stay out of the images.

ARG PYTHON_IMAGE=python:3.11-slim
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9

FROM ${UV_IMAGE} AS uv

FROM ${PYTHON_IMAGE} AS build
COPY --from=uv /uv /usr/local/bin/uv
# Bytecode compiled at build time, so containers start faster and never write
# .pyc files; copy mode and no cache, because this stage is thrown away.
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_NO_CACHE=1 \
    UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /app
COPY pyproject.toml uv.lock ./
# --locked: exactly what uv.lock says, and a lock that no longer matches
# pyproject.toml fails the build instead of being re-resolved.
RUN uv sync --locked --no-default-groups --no-install-project

FROM build AS build-load
RUN uv sync --locked --no-default-groups --group load --no-install-project

FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PATH=/app/.venv/bin:$PATH
# A fixed uid, so whatever the lab writes into a volume has a predictable owner.
RUN useradd --system --uid 10001 --user-group --home-dir /app --no-create-home lab
WORKDIR /app

FROM runtime AS load
COPY --from=build-load /app/.venv /app/.venv
# The locustfiles (mounted, see docker-compose.yml) import the shared core only.
COPY lab ./lab
USER lab
EXPOSE 8089
CMD ["locust", "--help"]

# Last stage: what `docker build .` gives without --target.
FROM runtime AS app
COPY --from=build /app/.venv /app/.venv
# The three floors of the code: the shared core, the queue adapters, the processes.
COPY lab ./lab
COPY workers ./workers
COPY services ./services
USER lab
EXPOSE 8000 8001 9000 5555 8082
CMD ["python", "-m", "services.api"]
