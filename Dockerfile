# syntax=docker/dockerfile:1
#
# The `tfdata` binary (dispatcher, worker and tools) in a small image:
#
#   docker build -t tfdata:0.1.0 .
#   docker run --rm tfdata:0.1.0 dispatcher --port 5050
#
# Stage 1 builds with the Rust toolchain the workspace asks for (protoc is
# vendored; aws-lc, object_store's TLS, and libjpeg-turbo compile with the
# image's gcc, libjpeg-turbo's SIMD with nasm).
# Stage 2 is Debian slim with CA certificates (object stores over HTTPS) and
# the binary, run as an unprivileged user. deploy/kubernetes uses it; see
# docs/deploy.md.

ARG RUST_VERSION=1.90
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS builder
# nasm: libjpeg-turbo's SIMD code, which mozjpeg-sys assembles.
RUN apt-get update \
 && apt-get install -y --no-install-recommends nasm \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the build reads (.dockerignore keeps the rest out of the context).
COPY Cargo.toml Cargo.lock clippy.toml ./
COPY proto proto
COPY crates crates
# Cache mounts keep the registry and the build between image builds; the
# binary is copied out because a cache mount is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p tfdata-cli \
 && install -D -m 0755 target/release/tfdata /out/tfdata

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 tfdata \
 && useradd --system --uid 65532 --gid tfdata --home-dir /var/lib/tfdata --shell /usr/sbin/nologin tfdata \
 && install -d -o tfdata -g tfdata -m 0750 /var/lib/tfdata
COPY --from=builder /out/tfdata /usr/local/bin/tfdata
USER 65532:65532
WORKDIR /var/lib/tfdata
# Dispatcher gRPC, worker gRPC, admin HTTP (/metrics, /healthz, /readyz).
EXPOSE 5050 5051 9090
# Exec form: tfdata is PID 1 and gets SIGTERM itself (a worker drains on it).
ENTRYPOINT ["/usr/local/bin/tfdata"]
CMD ["--help"]
