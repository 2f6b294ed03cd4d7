//go:build !linux

package target

import "syscall"

// withBindNoPort returns next unchanged: IP_BIND_ADDRESS_NO_PORT is Linux's.
func withBindNoPort(next func(network, address string, c syscall.RawConn) error) func(string, string, syscall.RawConn) error {
	return next
}
