# shellcheck shell=bash
# Generation v1 of scripts/cpu-per-request.sh: a tree before issue 21 (module
# path `levee`, the shop-and-battle game built into the tiers, scenario
# language version 1, subprotocol levee.v1). Sourced by the script; it
# defines what differs between tree generations and nothing else.
#
#   GEN_PKGS          the packages built (go build -o BIN/), from the tree
#   GEN_COUNTER_<t>   the counter summed (all its series) for tier t: requests
#                     the tier answered, whatever the outcome
#                     (the output lists the series whose outcome label is
#                     not "ok")
#   GEN_CONNS         the gate's gauge of open player connections
#   gen_battle_cmd, gen_logic_cmd, gen_gate_cmd, gen_healthy, gen_load_args,
#   gen_capacity_args, gen_target_args
#                     how the tiers are started and checked and how the load
#                     tool is driven (below)

GEN_PKGS=(./cmd/gate ./cmd/logic ./cmd/battle ./cmd/loadtest)
GEN_COUNTER_gate=gate_requests_total     # {action, outcome}: every reply written
GEN_COUNTER_logic=logic_requests_total   # {action, outcome}: every request answered
GEN_COUNTER_battle=battle_requests_total # {outcome}: every Simulate call
GEN_CONNS=gate_active_connections

# Each gen_*_cmd sets GEN_CMD to a tier's command line.
# $1 BIN dir, $2 gRPC port, $3 ops port
gen_battle_cmd() {
  GEN_CMD=("$1/battle" -grpc-addr "127.0.0.1:$2" -ops-addr "127.0.0.1:$3" -log-level warn)
}
# $1 BIN, $2 gRPC, $3 ops, $4 data dir, $5 battle gRPC port
gen_logic_cmd() {
  GEN_CMD=("$1/logic" -grpc-addr "127.0.0.1:$2" -ops-addr "127.0.0.1:$3" -data-dir "$4"
    -shards 8 -battle-addrs "127.0.0.1:$5" -log-level warn)
}
# $1 BIN, $2 WebSocket port, $3 gRPC, $4 ops, $5 logic gRPC port, $6 token secret
gen_gate_cmd() {
  GEN_CMD=("$1/gate" -addr "127.0.0.1:$2" -grpc-addr "127.0.0.1:$3" -ops-addr "127.0.0.1:$4"
    -logic-addrs "127.0.0.1:$5" -shards 8 -token-secret "$6" -line-mode open -log-level warn)
}
# $1 BIN, $2 tier binary (gate, logic, battle), $3 its gRPC address: exit 0
# when it answers its health check
gen_healthy() {
  "$1/$2" healthcheck -addr "$3" >/dev/null 2>&1
}
# $1 the mix file, $2 players, $3 run.duration in seconds: sets GEN_CMD to
# the arguments of `loadtest run` before the target flags
gen_load_args() {
  GEN_CMD=(run "$1" -set "arrivals.phases[0].players=$2" -set "arrivals.phases[1].players=$2"
    -set "run.duration=${3}s" -set seed=1 -workers 1 -progress off)
}
# $1 the mix file: the arguments of `loadtest capacity` before the target flags
gen_capacity_args() {
  GEN_CMD=(capacity "$1" -progress off)
}
# $1 WebSocket URL, $2 token secret: the target flags of both commands
gen_target_args() {
  GEN_CMD=(-gate-urls "$1" -token-secret "$2")
}
