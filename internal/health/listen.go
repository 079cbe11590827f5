package health

import (
	"context"
	"net"
)

// Listener opens listening sockets; tests substitute it.
type Listener interface {
	Listen(ctx context.Context, network, address string) (net.Listener, error)
}

// NetListener is the real Listener (net.ListenConfig).
type NetListener struct{}

// Listen opens a TCP listener.
func (NetListener) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, network, address)
}
