# dra-gitops: slim, non-root, read-only-root-filesystem friendly.
#   docker build -t dra-gitops . && docker run --rm -v "$PWD:/repo:ro" dra-gitops check /repo/manifests-example
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
COPY policies ./policies
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
# git: GitPython shells out to it to read repositories.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 65532 --create-home --home-dir /home/dra-gitops dra-gitops
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
# Writable scratch space only under /tmp (mount an emptyDir there with readOnlyRootFilesystem: true).
ENV HOME=/tmp PYTHONDONTWRITEBYTECODE=1 RUST_BACKTRACE=0
ENTRYPOINT ["dra-gitops"]
CMD ["--help"]
