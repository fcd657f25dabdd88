package host

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
)

// The console log is read to its end, or followed: a follower waits for
// the first boot's file, returns what is appended, and a Close ends a
// read that waits.
func TestConsoleLog(t *testing.T) {
	d := &DataOwner{Paths: config.Paths{Root: t.TempDir()}}
	ctx := context.Background()
	if _, err := d.ConsoleLog(ctx, control.ConsoleLogRequest{}); !errors.Is(err, agentproto.ErrNotFound) {
		t.Fatalf("no log yet: %v, want not found", err)
	}
	r, err := d.ConsoleLog(ctx, control.ConsoleLogRequest{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	path := d.Paths.ConsoleLog()
	if err := os.MkdirAll(d.Paths.Logs(), 0o700); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		b := make([]byte, 64)
		n, _ := r.Read(b)
		got <- string(b[:n])
	}()
	if err := os.WriteFile(path, []byte("boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "boot\n" {
		t.Fatalf("first read: %q", s)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("more\n")
	f.Close()
	b := make([]byte, 64)
	if n, err := r.Read(b); err != nil || string(b[:n]) != "more\n" {
		t.Fatalf("appended: %q %v", b[:n], err)
	}
	ended := make(chan error)
	go func() { _, err := r.Read(b); ended <- err }()
	r.Close()
	if err := <-ended; err != io.EOF {
		t.Fatalf("a read waiting when closed: %v, want EOF", err)
	}
	whole, err := d.ConsoleLog(ctx, control.ConsoleLogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	if all, _ := io.ReadAll(whole); string(all) != "boot\nmore\n" {
		t.Fatalf("the whole log: %q", all)
	}
}
