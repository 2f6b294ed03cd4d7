# shellcheck shell=bash
# TLS plumbing of the benchmark scripts that measure the gate with and
# without TLS at the edge (scripts/hold-memory.sh, scripts/tls-handshake-cpu.sh,
# scripts/cpu-per-request.sh): a throw-away CA and edge certificate. Source
# it; it only defines things.
#
#   edge_cert DIR      write DIR/ca.crt (a new CA), DIR/edge.crt and
#                      DIR/edge.key (ECDSA P-256, for DNS localhost and
#                      IP 127.0.0.1, valid 2 days) with openssl; the keys
#                      never leave DIR (a temp directory)
#   gate_has_tls BIN   exit 0 when BIN (a gate binary) has -tls-cert
#
# The tiers' -insecure (between the tiers; the edge is what is measured)
# comes from scripts/lib/cluster.sh's LEVEE_INSECURE=1.

edge_cert() { # dir
  local d=$1
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=levee-bench-ca -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout "$d/edge.key" -out "$d/edge.csr" 2>/dev/null
  openssl x509 -req -in "$d/edge.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
    -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') \
    -out "$d/edge.crt" 2>/dev/null
  chmod 600 "$d"/*.key
}

gate_has_tls() { # gate binary
  "$1" -h 2>&1 | grep -q -- '^  -tls-cert'
}
