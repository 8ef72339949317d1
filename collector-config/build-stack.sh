#!/usr/bin/env bash
# Builds the real observability components the tests run, from Go modules, into .stack/:
#   .stack/otelcol/otelcol-scorers   the OpenTelemetry Collector of builder-config.yaml
#   .stack/jaeger                    Jaeger v2 (github.com/jaegertracing/jaeger/cmd/jaeger)
# Each is rebuilt only when what it is built from changes (a stamp holds the inputs' checksum).
# The first build downloads modules and compiles for several minutes on 2 cores; Go's module and
# build caches (~/go/pkg/mod, ~/.cache/go-build) make a rebuild in a fresh clone quick.
set -euo pipefail
cd "$(dirname "$0")/.."

OCB_VERSION=v0.161.0          # the builder, at the release of builder-config.yaml
JAEGER_MODULE_VERSION=v1.76.0 # Jaeger v2.13.0 (the project tags both); image jaegertracing/jaeger:2.13.0
STACK=.stack
mkdir -p "$STACK"

command -v go >/dev/null || { echo "build-stack: Go is needed (https://go.dev/dl/)" >&2; exit 1; }

stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
fresh() { [ -x "$1" ] && [ -f "$1.stamp" ] && [ "$(cat "$1.stamp")" = "$2" ]; }
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }

collector="$STACK/otelcol/otelcol-scorers"
want="$(stamp_of collector-config/builder-config.yaml collector-config/build-stack.sh)"
if ! fresh "$collector" "$want"; then
    echo ">>> Building the OpenTelemetry Collector (ocb $OCB_VERSION, collector-config/builder-config.yaml): first time about 3-6 min on 2 cores"
    start=$(date +%s)
    GOBIN="$PWD/$STACK/bin" go install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION"
    "$STACK/bin/builder" --config collector-config/builder-config.yaml >"$STACK/otelcol-build.log" 2>&1 \
        || { tail -30 "$STACK/otelcol-build.log" >&2; exit 1; }
    echo "$want" >"$collector.stamp"
    echo ">>> Collector built in $(elapsed "$start"): $collector"
fi

jaeger="$STACK/jaeger"
want="$(echo "$JAEGER_MODULE_VERSION" | cat - collector-config/build-stack.sh | sha256sum | cut -d' ' -f1)"
if ! fresh "$jaeger" "$want"; then
    echo ">>> Building Jaeger v2 (github.com/jaegertracing/jaeger $JAEGER_MODULE_VERSION): first time about 4-8 min on 2 cores"
    start=$(date +%s)
    work="$STACK/jaeger-build"
    rm -rf "$work" && mkdir -p "$work"
    (cd "$work" && go mod init otel-scorers/jaeger-build >/dev/null 2>&1 \
        && go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_MODULE_VERSION" \
        && go build -o ../jaeger github.com/jaegertracing/jaeger/cmd/jaeger) >"$STACK/jaeger-build.log" 2>&1 \
        || { tail -30 "$STACK/jaeger-build.log" >&2; exit 1; }
    echo "$want" >"$jaeger.stamp"
    echo ">>> Jaeger built in $(elapsed "$start"): $jaeger"
fi
