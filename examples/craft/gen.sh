#!/usr/bin/env bash
# Regenerates craftpb from proto/ with protoc and protoc-gen-go (from
# Levee's `make tools`: ../../.tools, or on PATH).
set -euo pipefail
cd "$(dirname "$0")"
PATH=$PWD/../../.tools:$PATH protoc -I proto --go_out=. --go_opt=module=example.com/craft proto/craft/v1/craft.proto
