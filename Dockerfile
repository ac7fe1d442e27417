# Dockerfile -- redlockd image: build on bookworm with the -dev packages, run on bookworm-slim
# with only the runtime libraries, as a non-root user.
#   make image (podman or docker: redlockd:VERSION, the image deploy/kubernetes names)
#   docker compose up      (see docker-compose.yml)

# ---- build -------------------------------------------------------------------------------
FROM debian:bookworm-slim AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential pkg-config \
      libmicrohttpd-dev libjansson-dev libhiredis-dev libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# .dockerignore keeps bin/, build/, .git and node_modules out: the binaries are always
# built here, never copied from the host.
COPY . .
# `make all` builds the service (bin/redlockd) and the CLI (bin/redlock); both go in the image.
RUN make -j"$(nproc)" all \
 && mkdir -p /out \
 && install -m 0755 bin/redlockd bin/redlock /out/ \
 && /out/redlockd --version

# ---- runtime -----------------------------------------------------------------------------
FROM debian:bookworm-slim
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libmicrohttpd12 libjansson4 libhiredis0.14 libcurl4 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 redlockd \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin redlockd
COPY --from=build /out/ /usr/local/bin/
# Numeric user so that Kubernetes' runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001
# Every interface of the container: the service is reachable where its port is published
# (docker-compose.yml: the host's loopback only).  Publish it on a public interface only
# with tokens and HTTPS on (REDLOCK_AUTH_TOKENS_FILE, REDLOCK_TLS_CERT/REDLOCK_TLS_KEY):
# deploy/README.md, "Not open to strangers".
ENV REDLOCK_LISTEN=0.0.0.0:8080
EXPOSE 8080
STOPSIGNAL SIGTERM
# No curl/wget in the image: the binary probes itself (exit 0 iff GET /healthz answers 200),
# on the listener the environment describes: REDLOCK_LISTEN's port, and https once
# REDLOCK_TLS_CERT is set.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["redlockd", "--probe"]
ENTRYPOINT ["redlockd"]
