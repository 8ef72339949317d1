#!/usr/bin/env bash
# Builds the virtual environment of one framework of the conformance matrix, .frameworks/NAME:
# the framework and its instrumentations (pinned in tests/frameworks/requirements/NAME.txt)
# first, then this project (installing both in one pip call stalled pip's resolver for minutes
# with strands-agents). Rebuilt only when the requirements or pyproject.toml change.
set -euo pipefail
name=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
req="$root/tests/frameworks/requirements/$name.txt"
venv="$root/.frameworks/$name"
python=${PYTHON:-python3}
stamp="$venv/.installed"
want=$(cat "$req" "$root/pyproject.toml" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
echo ">>> Building the $name framework environment (.frameworks/$name; once, then cached)"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r "$req"
"$venv/bin/python" -m pip install --quiet -e "$root"
"$venv/bin/python" -m pip check >/dev/null || "$venv/bin/python" -m pip check || true
echo "$want" > "$stamp"
