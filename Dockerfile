# slackswapd, the SlackSwap planning service, and the slackswap CLI.
#
#   docker build -t slackswapd:0.2.0 .
#   docker run --rm -p 50051:50051 -p 9090:9090 slackswapd:0.2.0
#
# Two stages, both Debian 12 (bookworm). The build stage runs the scripts CI
# runs: scripts/setup.sh (Debian packages), scripts/build.sh (CMake) and
# scripts/install.sh (the binaries, stripped). The runtime stage is
# bookworm-slim (the binaries link Debian's shared gRPC, protobuf, Abseil and
# prometheus-cpp, so not distroless) with only the packages in
# scripts/runtime-packages.txt, installed by `scripts/install.sh
# --runtime-packages`, and the two binaries. It runs as UID 65532, not root.
# tests/deploy/ lints this file (dockerfilelint) and checks that what it
# relies on holds; docs/operations.md explains running it.

FROM debian:bookworm AS build
WORKDIR /src
# The build tier of packages first, in its own layer: it survives source
# edits. The image needs nothing the tests use.
ENV SLACKSWAP_TIER=build
COPY scripts/setup.sh scripts/
RUN bash scripts/setup.sh build
COPY . .
# .git is not in the build context: pass the commit for --version and
# slackswap_build_info (docker build --build-arg SLACKSWAP_COMMIT=$(git
# rev-parse --short=12 HEAD) .).
ARG SLACKSWAP_COMMIT=unknown
RUN BUILD_DIR=/build SLACKSWAP_COMMIT="$SLACKSWAP_COMMIT" \
    bash scripts/build.sh --target slackswapd slackswap
RUN BUILD_DIR=/build bash scripts/install.sh --strip /opt/slackswap

FROM debian:bookworm-slim
LABEL org.opencontainers.image.title="slackswapd" \
      org.opencontainers.image.description="SlackSwap activation-memory planning service (gRPC)" \
      org.opencontainers.image.version="0.2.0" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY scripts/install.sh scripts/runtime-packages.txt /tmp/slackswap-install/
RUN bash /tmp/slackswap-install/install.sh --runtime-packages \
    && rm -rf /var/lib/apt/lists/* /tmp/slackswap-install
COPY --from=build /opt/slackswap/ /usr/local/
# Not root: an unprivileged UID with no entry in /etc/passwd (Kubernetes'
# runAsUser in deploy/kubernetes/deployment.yaml is the same).
USER 65532:65532
# gRPC (slackswap.v1.Planner, grpc.health.v1, reflection) and Prometheus
# metrics at /metrics: slackswapd's defaults, --port and --metrics_port.
EXPOSE 50051 9090
HEALTHCHECK --interval=10s --timeout=5s --retries=3 \
    CMD ["slackswap", "health", "--server", "127.0.0.1:50051", "--timeout", "3"]
ENTRYPOINT ["slackswapd"]
CMD ["--port=50051", "--metrics_port=9090"]
