#!/usr/bin/env bash
# The gate's CPU per TLS handshake in a surge (issue 22, "Figures"): a fresh
# gate (line in queueing mode: everybody waits, nothing reaches logic) takes
# a surge of HS_CONNS (5,000) connections arriving over HS_OVER (5 s), held
# 5 s, then closed, three ways, one after the other in each round:
#
#   plain     ws://, no TLS
#   full      wss:// with the load tool's -tls-session-cache=false: every
#             connection a full handshake
#   resumed   wss:// with the session cache on (the default): after the
#             first handshakes of the load process, the rest resume
#
# The gate's CPU (utime+stime, /proc/PID/stat) is read from before the surge
# to after the load tool has ended (closes included) and divided by the
# connections; the TLS runs' extra over the plain run's, per connection, is
# the cost of a full or a resumed handshake (a resumed run's few full
# handshakes are counted by the load tool, tls_full_handshakes, and shown).
# Each round runs the three in a rotated order; it prints a row per run and
# the medians. The edge certificate is ECDSA P-256 from a throw-away CA
# (scripts/lib/edgetls.sh). The load tool shares the 2 cores with the gate.
#
# Environment: HS_CONNS (5000), HS_OVER (5s), HS_ROUNDS (3), BASE_PORT
# (8080: gate on BASE+10.., logic on BASE+920), HS_DIR (a temp dir), HS_BUILD
# (1: build bin/ first). It takes an exclusive flock on /tmp/levee-heavy.lock
# for the whole measurement unless HS_LOCK=none. Loopback only; it stops every
# process it started, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${HS_DIR:-$(mktemp -d -t levee-handshake.XXXXXX)}
CONNS=${HS_CONNS:-5000}
OVER=${HS_OVER:-5s}
ROUNDS=${HS_ROUNDS:-3}
LOCK=${HS_LOCK:-/tmp/levee-heavy.lock}
CLUSTER_NAME=tls-handshake-cpu CLUSTER_LOGS=$DIR/logs
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
# shellcheck source=scripts/lib/edgetls.sh
. scripts/lib/edgetls.sh
cluster_ports "${BASE_PORT:-8080}"
SECRET=hs-$RANDOM-$RANDOM-$RANDOM
mkdir -p "$DIR/logs"
HZ=$(getconf CLK_TCK)
[ "$CONNS" -le 15000 ] || { echo "tls-handshake-cpu: HS_CONNS is at most 15000 (one load process)" >&2; exit 2; }

want_fds=$((CONNS + 2000))
if [ "$(ulimit -n)" -lt "$want_fds" ]; then
  ulimit -n "$want_fds" 2>/dev/null || { echo "tls-handshake-cpu: cannot raise ulimit -n to $want_fds" >&2; exit 1; }
fi
if [ "${HS_BUILD:-1}" != 0 ]; then
  echo "tls-handshake-cpu: building bin/"
  mkdir -p bin
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/ ./cmd/gate ./cmd/logic ./cmd/loadtest
fi
gate_has_tls bin/gate || { echo "tls-handshake-cpu: bin/gate has no -tls-cert (a tree before issue 22)" >&2; exit 1; }
edge_cert "$DIR/certs"

cluster_trap -q "run files and logs are in $DIR"
if [ "$LOCK" != none ]; then
  exec 9>>"$LOCK"
  echo "tls-handshake-cpu: waiting for $LOCK"
  flock 9
fi

ticks() { # pid: utime + stime in clock ticks
  local s
  s=$(cat "/proc/$1/stat")
  s=${s##*) }
  # shellcheck disable=SC2086
  set -- $s
  echo $((${12} + ${13}))
}
counter() { # run file, counter: its total in the run's end summary (0 if none)
  local v
  v=$(grep '"type":"end"' "$1" | grep -o "\"$2\":[0-9]*" | cut -d: -f2)
  echo "${v:-0}"
}

RESULTS=$DIR/results.tsv
: >"$RESULTS"
port_shift=0
surge() { # kind (plain, full, resumed), round
  local kind=$1 r=$2 scheme=wss flags=() gate_tls=()
  case $kind in
  plain) scheme=ws ;;
  full) flags=(-ca-file "$DIR/certs/ca.crt" -tls-session-cache=false) ;;
  resumed) flags=(-ca-file "$DIR/certs/ca.crt") ;;
  esac
  [ "$kind" = plain ] || gate_tls=(-tls-cert "$DIR/certs/edge.crt" -tls-key "$DIR/certs/edge.key")
  # A new gate port each run: the last run's TIME_WAIT sockets stay on theirs.
  local g=$((GATE + 10 + port_shift)) gg=$((GATE + 11 + port_shift)) go=$((GATE + 12 + port_shift))
  port_shift=$(((port_shift + 3) % 300))
  ports_free -h "set BASE_PORT" $g $gg $go
  proc_start "gate-$kind-$r" bin/gate -addr 127.0.0.1:$g -grpc-addr 127.0.0.1:$gg -ops-addr 127.0.0.1:$go \
    -logic-addrs 127.0.0.1:$LOGIC -shards 8 -token-secret "$SECRET" -line-mode queueing -log-level warn \
    "${gate_tls[@]}"
  local pid=$PROC_PID
  wait_healthy "gate-$kind-$r" gate 127.0.0.1:$gg
  sleep 2
  local c0 c1 out=$DIR/$kind-$r.ndjson rc=0
  c0=$(ticks "$pid")
  bin/loadtest run hold -gate-urls "$scheme://127.0.0.1:$g/ws" -token-secret "$SECRET" -label "$kind round $r" \
    -set "arrivals.phases[0].duration=1s" -set "arrivals.phases[1].duration=$OVER" -set "arrivals.phases[1].players=$CONNS" \
    -set "arrivals.phases[2].duration=5s" -set "arrivals.phases[2].players=$CONNS" -set "run.duration=$(( ${OVER%s} + 6 ))s" \
    -progress off -out "$out" "${flags[@]}" >"$DIR/$kind-$r.txt" 2>"$DIR/logs/loadtest-$kind-$r.log" || rc=$?
  sleep 1 # the gate's side of the closes
  c1=$(ticks "$pid")
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ "$rc" = 0 ] || { echo "tls-handshake-cpu: the $kind run failed (exit $rc): $DIR/$kind-$r.txt" >&2; tail -n 30 "$DIR/$kind-$r.txt" >&2; exit 1; }
  local held full resumed
  held=$(bin/loadtest figure "$out" held)
  full=$(counter "$out" tls_full_handshakes)
  resumed=$(counter "$out" tls_resumed_handshakes)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$kind" "$held" "$full" "$resumed" \
    "$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v n="$held" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')" >>"$RESULTS"
  echo "tls-handshake-cpu: round $r $kind: $held held, TLS handshakes $full full / $resumed resumed, gate CPU $(awk -v t=$((c1 - c0)) -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }') s"
}

echo "tls-handshake-cpu: $(nproc) cores, $(uname -sr), $(go version | cut -d' ' -f3-); $CONNS connections over $OVER, $ROUNDS round(s); the load tool shares the cores with the gate"
proc_start logic bin/logic -grpc-addr 127.0.0.1:$LOGIC -ops-addr 127.0.0.1:$LOGIC_OPS -data-dir "$DIR/logic" \
  -shards 8 -battle-addrs 127.0.0.1:1 -log-level warn
wait_healthy logic logic 127.0.0.1:$LOGIC
kinds=(plain full resumed)
for ((r = 1; r <= ROUNDS; r++)); do
  for ((k = 0; k < 3; k++)); do surge "${kinds[$(((k + r - 1) % 3))]}" "$r"; done
done

echo
echo "Per run: µs of gate CPU per connection (surge, 5 s held, close)"
{
  printf 'round\tkind\theld\tTLS full\tTLS resumed\tµs CPU/connection\n'
  cat "$RESULTS"
} | column -t -s $'\t'
echo
echo "Per round: the TLS runs' extra µs per connection over the plain run's (the cost of a handshake); the median over the rounds"
awk -F'\t' '
  { v[$1, $2] = $6; rounds[$1] = 1 }
  END {
    n = 0
    for (r in rounds) { n++; f[n] = v[r, "full"] - v[r, "plain"]; s[n] = v[r, "resumed"] - v[r, "plain"]; p[n] = v[r, "plain"] }
    for (a = 1; a <= n; a++) for (b = a + 1; b <= n; b++) {
      if (f[b] < f[a]) { t = f[a]; f[a] = f[b]; f[b] = t }
      if (s[b] < s[a]) { t = s[a]; s[a] = s[b]; s[b] = t }
      if (p[b] < p[a]) { t = p[a]; p[a] = p[b]; p[b] = t }
    }
    m = int((n + 1) / 2)
    printf "plain connection: median %.1f µs (%.1f-%.1f)\n", p[m], p[1], p[n]
    printf "full handshake:    median %.1f µs extra (%.1f-%.1f)\n", f[m], f[1], f[n]
    printf "resumed handshake: median %.1f µs extra (%.1f-%.1f)\n", s[m], s[1], s[n]
  }' "$RESULTS"
