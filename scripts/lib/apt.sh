# apt_install NAME [APT-OPTION...] PACKAGE...: installs Debian packages for a tool the
# tests need, quietly (apt's output is shown only when it fails), as root or
# through sudo, without starting any service a package brings: invoke-rc.d
# asks /usr/sbin/policy-rc.d whether to start one, and exit 101 says no; one
# is put there for the install only, when there is none already. NAME
# prefixes the messages. Sourced by scripts/ensure-*.sh.
apt_install() {
	local name=$1
	shift
	local sudo=""
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || { echo "$name: need root or sudo to install $*" >&2; return 1; }
		sudo="sudo"
	fi
	local log policy=/usr/sbin/policy-rc.d own_policy=0 ok=1
	log=$(mktemp)
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
		$sudo chmod 755 "$policy"
		own_policy=1
	fi
	if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >"$log" 2>&1; then
		ok=0
	fi
	if [[ $own_policy -eq 1 ]]; then
		$sudo rm -f "$policy"
	fi
	if [[ $ok -eq 0 ]]; then
		cat "$log" >&2
		rm -f "$log"
		echo "$name: installing $* failed" >&2
		return 1
	fi
	rm -f "$log"
}
