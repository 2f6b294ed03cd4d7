package target

import "syscall"

// ipBindAddressNoPort is Linux's IP_BIND_ADDRESS_NO_PORT (linux/in.h),
// missing from package syscall on most architectures.
const ipBindAddressNoPort = 0x18

// withBindNoPort wraps a net.Dialer Control hook (nil: none) so that a
// socket bound to a source address (Dialer.LocalAddr, port 0) gets its port
// at connect, unique per destination, and not at bind, where any port in
// use on the address, TIME_WAIT included, is skipped: thousands of
// connections from one address, run after run, would otherwise exhaust the
// ephemeral range.
func withBindNoPort(next func(network, address string, c syscall.RawConn) error) func(string, string, syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		if next != nil {
			if err := next(network, address, c); err != nil {
				return err
			}
		}
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
		}); err != nil {
			return err
		}
		return serr
	}
}
