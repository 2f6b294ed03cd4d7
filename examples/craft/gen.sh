#!/usr/bin/env bash
# Regenerates craftpb from proto/ with protoc and protoc-gen-go (Levee's
# `make tools` puts it in ../../.tools; else it must be on PATH). With an
# argument, writes OUT/craftpb instead (Levee's make proto-check diffs it).
set -euo pipefail
cd "$(dirname "$0")"
out=${1:-.}
mkdir -p "$out"
PATH=$PWD/../../.tools:$PATH protoc -I proto --go_out="$out" --go_opt=module=example.com/craft proto/craft/v1/craft.proto
