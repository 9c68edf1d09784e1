# Tessera operator image: `tessera run` (the Deployment) and `tessera agent vnpu` (the DaemonSet).
#
#   docker build -t REGISTRY/tessera:0.1.0 .
#
# Two stages on the same pinned base: the first builds a virtual environment from the wheel,
# the second copies only that environment and runs as an unprivileged user.
ARG PYTHON_IMAGE=python:3.12.8-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# Only the operator's sources: the dev cluster (devcluster/, the simulators) never enters it.
COPY pyproject.toml setup.py README.md ./
COPY api/ api/
COPY operator/ operator/
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/tessera \
 && /opt/tessera/bin/pip install /wheels/*.whl

FROM ${PYTHON_IMAGE}
RUN groupadd --gid 65532 tessera \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin tessera
COPY --from=build /opt/tessera /opt/tessera
ENV PATH=/opt/tessera/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["tessera"]
CMD ["run"]
