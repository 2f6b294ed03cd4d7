# shellcheck shell=bash
# Generation v3 of scripts/cpu-per-request.sh: a tree of issue 22, whose
# tiers refuse to start without mutual TLS between them or an explicit
# -insecure. The benchmark measures the edge: the tiers talk plaintext
# (-insecure) as before, and the gate serves TLS when the tree is given as
# DIR:tls. Otherwise v2's: v1/tree.sh with -insecure added to each tier's
# command line, and the same scenario files (copies of v2's).
# shellcheck source=scripts/cpu-per-request/v1/tree.sh
. "$(dirname "${BASH_SOURCE[0]}")/../v1/tree.sh"
eval "v1_$(declare -f gen_battle_cmd)"
eval "v1_$(declare -f gen_logic_cmd)"
eval "v1_$(declare -f gen_gate_cmd)"
gen_battle_cmd() { v1_gen_battle_cmd "$@" && GEN_CMD+=(-insecure); }
gen_logic_cmd() { v1_gen_logic_cmd "$@" && GEN_CMD+=(-insecure); }
gen_gate_cmd() { v1_gen_gate_cmd "$@" && GEN_CMD+=(-insecure); }
