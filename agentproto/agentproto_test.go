package agentproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// pair connects a client to a server mux over an in-memory pipe.
func pair(t testing.TB, m *Mux) *Client {
	t.Helper()
	a, b := net.Pipe()
	srv, err := NewServerPeer(b)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), m)
	cli, err := NewClientPeer(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(nil); srv.Close(nil) })
	m.Handle(OpHello, Unary(func(_ context.Context, r *HelloRequest) (*HelloResponse, error) {
		return &HelloResponse{Major: VersionMajor, Minor: VersionMinor, Distro: "test"}, nil
	}))
	c, err := Handshake(context.Background(), cli)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestExecStreamsAndEchoesStdin(t *testing.T) {
	m := NewMux()
	m.Handle(OpExec, Exec(func(ctx context.Context, req *ExecRequest, eio ExecIO) (ExitStatus, error) {
		if err := eio.Started(7); err != nil {
			return ExitStatus{}, err
		}
		fmt.Fprintf(eio.Stderr, "running %s\n", req.Shell)
		n, _ := io.Copy(eio.Stdout, eio.Stdin) // like cat
		return ExitStatus{Exited: true, Code: int(n)}, nil
	}))
	c := pair(t, m)
	var out, errOut bytes.Buffer
	st, err := c.Exec(context.Background(), ExecRequest{Shell: "cat"}, strings.NewReader("hello\n"), &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello\n" || errOut.String() != "running cat\n" || st.Code != 6 {
		t.Fatalf("stdout %q stderr %q status %+v", out.String(), errOut.String(), st)
	}
}

// firstWrite signals when output first arrives.
type firstWrite struct {
	once sync.Once
	ch   chan struct{}
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.once.Do(func() { close(f.ch) })
	return len(p), nil
}

func TestExecOutputArrivesBeforeExit(t *testing.T) {
	release := make(chan struct{})
	m := NewMux()
	m.Handle(OpExec, Exec(func(ctx context.Context, req *ExecRequest, eio ExecIO) (ExitStatus, error) {
		eio.Started(1)
		io.WriteString(eio.Stdout, "line 1\n")
		<-release
		return ExitStatus{Exited: true}, nil
	}))
	c := pair(t, m)
	fw := &firstWrite{ch: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), ExecRequest{Shell: "x"}, nil, fw, nil)
		done <- err
	}()
	select {
	case <-fw.ch:
	case <-time.After(5 * time.Second):
		t.Fatal("first line did not arrive while the command ran")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestErrorsKeepTheirKind(t *testing.T) {
	m := NewMux()
	m.Handle(OpStat, Unary(func(_ context.Context, r *PathRequest) (*FileInfo, error) {
		return nil, fmt.Errorf("stat %s: %w", r.Path, ErrNotFound)
	}))
	m.Handle(OpExec, Exec(func(ctx context.Context, req *ExecRequest, eio ExecIO) (ExitStatus, error) {
		return ExitStatus{}, fmt.Errorf("user %q: %w", req.User, ErrNoSuchUser)
	}))
	c := pair(t, m)
	_, err := c.Stat(context.Background(), PathRequest{Path: "/nope"})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "/nope") {
		t.Fatalf("stat: %v", err)
	}
	_, err = c.Exec(context.Background(), ExecRequest{Identity: Identity{User: "ghost"}, Shell: "true"}, nil, nil, nil)
	if !errors.Is(err, ErrNoSuchUser) {
		t.Fatalf("exec: %v", err)
	}
	if err := c.Mkdir(context.Background(), PathRequest{Path: "/x"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("unknown op: %v", err)
	}
}

func TestExecCancelSendsKill(t *testing.T) {
	got := make(chan int, 1)
	m := NewMux()
	m.Handle(OpExec, Exec(func(ctx context.Context, req *ExecRequest, eio ExecIO) (ExitStatus, error) {
		eio.Started(1)
		sig := <-eio.Signals
		got <- sig
		return ExitStatus{Exited: true, Code: 128 + sig, Signal: sig}, nil
	}))
	c := pair(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	st, err := c.Exec(ctx, ExecRequest{Shell: "sleep 100"}, nil, nil, nil)
	// Either the deadline tears the call down first, or the guest's answer
	// to the kill (the killed command's status) wins the race.
	if !errors.Is(err, context.DeadlineExceeded) && !(err == nil && st.Signal == 9) {
		t.Fatalf("err = %v, status %+v; want deadline exceeded or a status killed by signal 9", err, st)
	}
	select {
	case sig := <-got:
		if sig != 9 {
			t.Fatalf("signal %d, want 9", sig)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("guest never got the kill")
	}
}

func TestFrameLimit(t *testing.T) {
	var b bytes.Buffer
	if err := WriteFrame(&b, FrameStdout, make([]byte, MaxFrame+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize write: %v", err)
	}
	// A corrupt header claiming a huge frame is refused before allocating.
	hdr := []byte{byte(FrameStdout), 0xff, 0xff, 0xff, 0xff}
	if _, _, err := ReadFrame(bytes.NewReader(hdr)); !errors.Is(err, ErrProtocol) {
		t.Fatalf("oversize read: %v", err)
	}
}

func BenchmarkUnaryRoundTrip(b *testing.B) {
	m := NewMux()
	m.Handle(OpStat, Unary(func(_ context.Context, r *PathRequest) (*FileInfo, error) {
		return &FileInfo{Path: r.Path}, nil
	}))
	c := pair(b, m)
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Stat(context.Background(), PathRequest{Path: "/"}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPrimeCodec(t *testing.T) {
	if err := PrimeCodec(); err != nil {
		t.Fatal(err)
	}
}
