package server

import (
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// Listener is the owner's control socket; closing it gives up ownership.
type Listener struct {
	net.Listener
	lock *os.File

	once sync.Once
	err  error
}

// Close stops listening and releases the ownership lock. The owner's
// closer and its server both close it; whichever comes second waits for
// the first, so no caller returns while the lock is still held (a CLI
// command that opens the next short-lived owner right after would be
// refused as if the data folder were owned).
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.err = l.Listener.Close()
		l.lock.Close()
	})
	return l.err
}

// Owned reports whether a process holds the data dir's ownership lock.
// An owner that quits closes its control socket a moment before it lets
// the lock go; a client waiting for it to be gone checks both. The probe
// takes a shared lock for an instant, so an owner starting at that very
// instant is refused as if the old one still ran.
func Owned(p config.Paths) bool {
	f, err := os.Open(p.OwnerLock())
	if err != nil {
		return false // never owned, or the folder is gone
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

func netListenUnix(path string) (net.Listener, error) { return net.Listen("unix", path) }

// Listen claims ownership of the data dir and listens on its control
// socket. The claim is an flock held until the listener is closed.
func Listen(p config.Paths) (*Listener, error) {
	if err := os.MkdirAll(p.Run(), 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(p.OwnerLock(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w (%s)", api.ErrOwned, p.Root)
	}
	sock := p.ControlSocket()
	os.Remove(sock) // stale from a crashed owner; we hold the lock
	ln, err := netListenUnix(sock)
	if err != nil {
		lock.Close()
		return nil, err
	}
	os.Chmod(sock, 0o600)
	return &Listener{Listener: ln, lock: lock}, nil
}
