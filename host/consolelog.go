package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
)

// ErrNoConsoleLog: the VM has not booted in this data folder yet.
var ErrNoConsoleLog = agentproto.Class(agentproto.ErrNotFound, "the console log is empty: the VM has not booted in this data folder yet (`osaurus-sandbox start` boots it)")

// consolePoll is how often a follower looks for more of the log: QEMU
// appends to a plain file, which has no way to say it grew.
const consolePoll = 300 * time.Millisecond

// ConsoleLog reads the VM's console log, following it when asked.
func (d *DataOwner) ConsoleLog(ctx context.Context, req control.ConsoleLogRequest) (io.ReadCloser, error) {
	path := d.Paths.ConsoleLog()
	f, err := os.Open(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && !req.Follow:
		return nil, ErrNoConsoleLog
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("console log: %w", err)
	}
	if !req.Follow {
		return f, nil
	}
	return &follower{path: path, f: f, done: make(chan struct{})}, nil
}

// follower reads a growing file: at its end it waits for more (or for
// the file itself, before a first boot) until it is closed.
type follower struct {
	path string
	mu   sync.Mutex // f
	f    *os.File
	once sync.Once
	done chan struct{}
}

func (r *follower) Read(p []byte) (int, error) {
	for {
		r.mu.Lock()
		if r.f == nil {
			r.f, _ = os.Open(r.path) // not there yet: wait below
		}
		f := r.f
		r.mu.Unlock()
		if f != nil {
			n, err := f.Read(p)
			if err != nil && err != io.EOF {
				select {
				case <-r.done: // closed under the read
					return n, io.EOF
				default:
				}
			}
			if n > 0 || err != nil && err != io.EOF {
				return n, err
			}
		}
		select {
		case <-r.done:
			return 0, io.EOF
		case <-time.After(consolePoll):
		}
	}
}

func (r *follower) Close() error {
	r.once.Do(func() {
		close(r.done)
		r.mu.Lock()
		if r.f != nil {
			r.f.Close()
		}
		r.mu.Unlock()
	})
	return nil
}
