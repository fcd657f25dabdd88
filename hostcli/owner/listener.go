package owner

import (
	"net"
	"os"
)

// Listener is the owner's control socket; closing it gives up ownership.
type Listener struct {
	net.Listener
	lock *os.File
}

// Close stops listening and releases the ownership lock.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.lock.Close()
	return err
}

func netListenUnix(path string) (net.Listener, error) { return net.Listen("unix", path) }
