# One image for every stratalog role: the operator controller (`stratalog operator`),
# the LogDir agents / engine sidecars, and the CLI.
#   docker build -t ghcr.io/stratalog/stratalog:0.1.0 .
# BASE: the Python base image of both stages (scripts/k8s-node passes a local stand-in).
ARG BASE=python:3.11-slim
FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY engine/ engine/
COPY operator/ operator/
# constraints.txt (scripts/lock) pins every dependency, so the image gets the versions CI tested.
RUN pip install --no-cache-dir --upgrade pip \
 && pip wheel --no-cache-dir --wheel-dir /wheels -c constraints.txt ".[server,operator]"

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "stratalog[server,operator]" \
 && rm -rf /wheels \
 && groupadd --system --gid 10001 stratalog \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin stratalog
# Numeric user so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["stratalog"]
CMD ["--help"]
