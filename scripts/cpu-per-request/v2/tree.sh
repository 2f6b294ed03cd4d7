# shellcheck shell=bash
# Generation v2 of scripts/cpu-per-request.sh: a tree of the generic game API
# (issue 21: module github.com/leveehq/levee, arena in examples/arena, the
# default binaries cmd/* being thin calls of gatecmd/logiccmd/battlecmd/
# loadtestcmd with arena's declaration, subprotocol levee.v2). The design
# keeps flags, ports, metric names and labels, so the tiers are started,
# checked and counted exactly as in v1: this file is v1/tree.sh, and only
# the scenario files (v2/read.yaml, v2/demo.yaml) differ. A later change to
# the tiers' flags or metrics gives this file its own definitions.
# shellcheck source=scripts/cpu-per-request/v1/tree.sh
. "$(dirname "${BASH_SOURCE[0]}")/../v1/tree.sh"
