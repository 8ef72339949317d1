#!/usr/bin/env bash
# Builds the llama-cpp-python wheel of the embedded local judge, once, into a wheelhouse that
# outlives the clone ($WHEELHOUSE, default ~/.cache/otel-scorers/wheels); `make demo` and
# `make test` then install it from there (pip install --find-links).
#
# llama-cpp-python has no wheel on PyPI, and its default build compiles llama.cpp's multimodal
# library and its "common" library (argument parsing, chat templates, JSON) that the Python
# bindings never load: 399 s on 2 cores, of which the core library is about a third. This
# build is the core only: LLAVA_BUILD=OFF, and LLAMA_BUILD_COMMON switched off in the sdist's
# CMakeLists.txt (its FORCE setting cannot be overridden from CMAKE_ARGS): 140 s on the same
# machine, the same judge (the local-judge tests pass on it). If the sdist's line changes in a
# later release, the build falls back to the full one, with a note.
set -euo pipefail
VERSION="${1:?usage: llama-wheel.sh VERSION PYTHON}"
PYTHON="${2:?usage: llama-wheel.sh VERSION PYTHON}"
WHEELHOUSE="${WHEELHOUSE:-$HOME/.cache/otel-scorers/wheels}"
mkdir -p "$WHEELHOUSE"

if ls "$WHEELHOUSE"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
    exit 0
fi
echo ">>> Building llama-cpp-python $VERSION for the embedded judge (core library only: about 2-3 min on 2 cores, once; kept in $WHEELHOUSE)"
start=$(date +%s)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-python -d "$work" \
    "llama-cpp-python==$VERSION"
tar xzf "$work"/llama_cpp_python-"$VERSION".tar.gz -C "$work"
src="$work/llama_cpp_python-$VERSION"
line='set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)'
if grep -qF "$line" "$src/CMakeLists.txt"; then
    sed -i "s|$line|set(LLAMA_BUILD_COMMON OFF CACHE BOOL \"\" FORCE)|" "$src/CMakeLists.txt"
else
    echo ">>> note: llama-cpp-python $VERSION no longer forces LLAMA_BUILD_COMMON as expected: full build" >&2
fi
# A portable build (no -march=native) runs as fast here and works on any x86-64 with AVX2.
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON} -DLLAVA_BUILD=OFF" \
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$PYTHON" -m pip wheel --quiet --no-deps -w "$work/wheel" "$src"
mv "$work"/wheel/llama_cpp_python-"$VERSION"-*.whl "$WHEELHOUSE"/
echo ">>> llama-cpp-python built in $(( $(date +%s) - start )) s"
