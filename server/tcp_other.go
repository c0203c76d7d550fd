//go:build !linux

package server

import (
	"net"
	"time"
)

// setUserTimeout does nothing here: TCP_USER_TIMEOUT is Linux's.
// Keepalives still find a vanished peer on an idle connection.
func setUserTimeout(net.Conn, time.Duration) {}
