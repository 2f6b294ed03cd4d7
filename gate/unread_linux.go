package gate

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unreadBytes is how many bytes the player has sent that the kernel holds
// for nc and the gate has not read yet (SIOCINQ); 0 when it cannot tell.
func unreadBytes(nc net.Conn) int {
	// Under TLS the kernel's bytes are the TLS connection's underlying
	// socket's (records, not frames: any is still a sign of life).
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
