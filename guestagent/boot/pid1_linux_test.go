//go:build linux

package boot

import (
	"bytes"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/internal/testwait"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Signals whose Go default ends the program are caught: this test binary
// survives them as PID 1 must.
func TestCatchFatalSignals(t *testing.T) {
	var buf syncBuf
	catchFatalSignals(log.New(&buf, "", 0))
	for _, sig := range []unix.Signal{unix.SIGQUIT, unix.SIGABRT, unix.SIGSEGV, unix.SIGBUS, unix.SIGTERM, unix.SIGUSR1, unix.SIGPIPE, unix.SIGSYS, unix.Signal(40)} {
		if err := unix.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		want := "ignoring " + sig.String()
		testwait.Eventually(t, want+" in the log", 10*time.Second, time.Millisecond, func() bool { return strings.Contains(buf.String(), want) })
	}
}
