# shellcheck shell=bash
# Plumbing shared by scripts/demo.sh, scripts/overload.sh, scripts/k8s-test.sh (free_port),
# scripts/hold-memory.sh and scripts/hold-line.sh: a local Levee cluster as
# processes on loopback (scripts/compose-test.sh and scripts/drills.sh use
# its ports_free).
# Source it after `cd` to the repository root (commands run as bin/X), with
# bash strict mode (set -euo pipefail) already on; it only defines things.
#
# It exports LEVEE_INSECURE=1 unless LEVEE_CLUSTER_CA is set (below).
#
# Variables the caller sets:
#   CLUSTER_NAME   prefix of every message ("demo: ...")
#   CLUSTER_LOGS   directory of the process logs, <name>.log each (may be
#                  changed between runs)
#
# Functions:
#   cluster_ports BASE       set the port scheme: GATE=BASE, GATE_GRPC=+1,
#                            GATE_OPS=+2, LOGIC=+920, LOGIC_OPS=+921,
#                            B1=+1020, B1_OPS=+1021, B2=+1120, B2_OPS=+1121,
#                            BARE=+1300, BARE_OPS=+1301
#   ports_free [-h HINT] PORT...
#                            exit 1 when one is in use on 127.0.0.1 (the
#                            message ends with HINT, by default "set
#                            BASE_PORT to move the cluster")
#   free_port VAR            set VAR to a TCP port nothing on 127.0.0.1
#                            listens on, not handed out before by this
#                            shell, outside the kernel's ephemeral range
#                            (below)
#   proc_start NAME CMD...   start CMD in the background, output to
#                            $CLUSTER_LOGS/NAME.log; its pid is added to
#                            pids and left in PROC_PID
#   wait_healthy NAME BIN ADDR
#                            poll `bin/BIN healthcheck -addr ADDR` for 20 s;
#                            exit 1 with the tail of NAME's log if it fails
#   wait_port NAME PORT      the same, for anything listening on PORT
#   procs_stop               SIGTERM everything started, wait for it all
#   cluster_trap [-q] FINAL  on exit (also on Ctrl-C / SIGTERM, status 130):
#                            announce and stop everything started (-q: stop
#                            silently), then print "$CLUSTER_NAME: FINAL"

# The tiers refuse to start without a transport-security choice (issue
# 22): these local clusters on loopback run plaintext gRPC between the
# tiers (-insecure, logged at start-up) unless the caller exports the
# cluster's certificates (LEVEE_CLUSTER_CA, LEVEE_CLUSTER_CERT,
# LEVEE_CLUSTER_KEY; see docs/security.md).
if [ -z "${LEVEE_CLUSTER_CA:-}" ]; then
  export LEVEE_INSECURE=${LEVEE_INSECURE:-1}
fi

CLUSTER_NAME=${CLUSTER_NAME:-cluster}
CLUSTER_LOGS=${CLUSTER_LOGS:-.}
pids=()
PROC_PID=

cluster_ports() { # base
  # shellcheck disable=SC2034 # used by the scripts that source this
  {
    GATE=$(($1)) GATE_GRPC=$(($1 + 1)) GATE_OPS=$(($1 + 2))
    LOGIC=$(($1 + 920)) LOGIC_OPS=$(($1 + 921))
    B1=$(($1 + 1020)) B1_OPS=$(($1 + 1021))
    B2=$(($1 + 1120)) B2_OPS=$(($1 + 1121))
    BARE=$(($1 + 1300)) BARE_OPS=$(($1 + 1301))
  }
}

ports_free() { # [-h hint] port...
  local hint="set BASE_PORT to move the cluster" p
  if [ "${1:-}" = -h ]; then
    hint=$2
    shift 2
  fi
  for p in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$CLUSTER_NAME: port $p on 127.0.0.1 is already in use; $hint" >&2
      exit 1
    fi
  done
}

# free_port VAR: the kernel takes the source ports of outgoing connections
# from /proc/sys/net/ipv4/ip_local_port_range (32768-60999 by default), so a
# port picked there that is free now may be some client's source port by
# the time a server binds it ("address already in use": on a fresh clone
# kube-controller-manager lost its port to etcd's and the apiserver's own
# connections). free_port picks from the larger stretch outside that range
# (10000 up to it, or above it up to 65535), checks with ss that nothing
# listens there, and remembers what it handed out. It sets VAR rather than
# printing, so that the memory survives (a $(...) is a subshell).
_ports_given=" "
free_port() { # var
  local lo=32768 hi=60999 base span p n
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  if [ $((lo - 10000)) -ge $((65535 - hi)) ]; then
    base=10000 span=$((lo - 10000))
  else
    base=$((hi + 1)) span=$((65535 - hi))
  fi
  if [ "$span" -lt 100 ]; then
    echo "$CLUSTER_NAME: free_port: the ephemeral range $lo-$hi (/proc/sys/net/ipv4/ip_local_port_range) leaves under 100 ports outside it" >&2
    return 1
  fi
  for ((n = 0; n < 1000; n++)); do
    p=$((base + (RANDOM * 32768 + RANDOM) % span))
    case $_ports_given in *" $p "*) continue ;; esac
    [ -z "$(ss -Htln "sport = :$p")" ] || continue
    _ports_given+="$p "
    printf -v "$1" '%s' "$p"
    return 0
  done
  echo "$CLUSTER_NAME: free_port: no free port in $base-$((base + span - 1)) after 1000 tries" >&2
  return 1
}

proc_start() { # name, then the command
  local name=$1
  shift
  "$@" >"$CLUSTER_LOGS/$name.log" 2>&1 &
  PROC_PID=$!
  pids+=("$PROC_PID")
}

wait_healthy() { # name, binary, addr
  local deadline=$((SECONDS + 20))
  until "bin/$2" healthcheck -addr "$3" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "$CLUSTER_NAME: $1 did not become healthy; its log:" >&2
      tail -n 20 "$CLUSTER_LOGS/$1.log" >&2
      exit 1
    fi
    sleep 0.2
  done
}

wait_port() { # name, port
  local deadline=$((SECONDS + 20))
  until (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      echo "$CLUSTER_NAME: nothing listens on port $2; log:" >&2
      tail -n 20 "$CLUSTER_LOGS/$1.log" >&2
      exit 1
    fi
    sleep 0.2
  done
}

procs_stop() {
  local pid
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  fi
  pids=()
}

_cluster_announce=1
_cluster_final=
_cluster_cleanup() {
  trap - EXIT INT TERM
  if [ "$_cluster_announce" = 1 ] && [ ${#pids[@]} -gt 0 ]; then
    echo "$CLUSTER_NAME: stopping the cluster (SIGTERM, graceful)"
  fi
  procs_stop
  echo "$CLUSTER_NAME: $_cluster_final"
}

cluster_trap() { # [-q] final message
  if [ "${1:-}" = -q ]; then
    _cluster_announce=0
    shift
  fi
  _cluster_final=$1
  trap _cluster_cleanup EXIT
  trap 'exit 130' INT TERM
}
