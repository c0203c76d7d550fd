package server

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout bounds how long data sent on c may stay unacknowledged
// before the kernel drops the connection (TCP_USER_TIMEOUT). Keepalives
// cannot find a vanished peer while data waits to be acknowledged, as
// the heartbeats of a server stream do; without this, the kernel
// retransmits for some fifteen minutes.
func setUserTimeout(c net.Conn, d time.Duration) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
}
