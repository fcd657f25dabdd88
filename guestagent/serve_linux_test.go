//go:build linux

package guestagent

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// The service behind the real protocol: handshake, exec with stdin and
// streamed output, and error codes that survive the wire.
func TestServiceOverAgentproto(t *testing.T) {
	e := newTestEnv(t)
	hostConn, guestConn := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.svc.ServeConn(ctx, guestConn, TransportVsock) }()
	defer func() {
		cancel()
		<-served
	}()
	peer, err := agentproto.NewClientPeer(hostConn)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close(nil)
	c, err := agentproto.Handshake(ctx, peer)
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Major != agentproto.VersionMajor || c.Info.AgentVersion != "test" || c.Info.Transport != TransportVsock || c.Info.Arch != runtime.GOARCH || c.Info.Kernel == "" {
		t.Fatalf("hello = %+v", c.Info)
	}

	var out, errOut bytes.Buffer
	st, err := c.Exec(ctx, agentproto.ExecRequest{
		Identity: agentproto.Identity{User: "alice"},
		Shell:    "id -un 2>/dev/null || id -u; tr a-z A-Z; echo oops >&2; exit 5",
	}, strings.NewReader("shout\n"), &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if st.Code != 5 || !strings.HasSuffix(out.String(), "SHOUT\n") || errOut.String() != "oops\n" {
		t.Fatalf("exec: %+v stdout %q stderr %q", st, out.String(), errOut.String())
	}

	_, err = c.ReadFile(ctx, agentproto.ReadFileRequest{Identity: agentproto.Identity{User: "alice"}, Path: filepath.Join(e.home("bob"), "x")})
	if !errors.Is(err, agentproto.ErrPermission) {
		t.Fatalf("read in bob's home over the wire: err = %v, want ErrPermission", err)
	}
	_, err = c.ReadFile(ctx, agentproto.ReadFileRequest{Identity: agentproto.Identity{User: "alice", Root: e.home("alice")}, Path: "/etc/passwd"})
	if !errors.Is(err, agentproto.ErrEscape) {
		t.Fatalf("escape over the wire: err = %v, want ErrEscape", err)
	}
	_, err = c.Exec(ctx, agentproto.ExecRequest{Identity: agentproto.Identity{User: "mallory"}, Argv: []string{"true"}}, nil, nil, nil)
	if !errors.Is(err, agentproto.ErrNoSuchUser) {
		t.Fatalf("exec as unknown user: err = %v, want ErrNoSuchUser", err)
	}

	// Cancelling the caller's context kills the remote process.
	ectx, ecancel := context.WithCancel(ctx)
	started := make(chan struct{})
	w := &notifyWriter{ch: started}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ectx, agentproto.ExecRequest{Shell: "echo $$; exec sleep 100"}, nil, w, nil)
		done <- err
	}()
	<-started
	ecancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled exec: err = %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(w.buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
}

type notifyWriter struct {
	ch  chan struct{}
	buf bytes.Buffer
}

func (w *notifyWriter) Write(b []byte) (int, error) {
	if w.buf.Len() == 0 {
		defer close(w.ch)
	}
	return w.buf.Write(b)
}

func TestHello(t *testing.T) {
	e := newTestEnv(t)
	os.MkdirAll(filepath.Join(e.base, "sbin"), 0o755)
	writeFile(t, filepath.Join(e.base, "sbin", "apk"), "", 0o755)
	writeFile(t, filepath.Join(e.base, "etc", "os-release"), "NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.20\n", 0o644)
	e.svc.AddWarning("share %s: %v", "work", "no such device")
	r, err := e.svc.Hello(WithTransport(bg, TransportSerial), &agentproto.HelloRequest{Major: 1, TimeUnixNano: time.Now().UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Distro != "alpine" || r.PackageMgr != "apk" || r.Transport != TransportSerial || len(r.Warnings) != 1 || r.Warnings[0] != "share work: no such device" {
		t.Fatalf("hello = %+v", r)
	}
	for content, want := range map[string]string{
		"ID=debian\n":           "debian",
		"ID=\"opensuse-tw\"\n":  "opensuse-tw",
		"NAME=x\n  ID='arch'\n": "arch",
		"ID_LIKE=debian\n":      "",
	} {
		p := filepath.Join(e.base, "os-release-test")
		writeFile(t, p, content, 0o644)
		if got := osReleaseID(p); got != want {
			t.Errorf("osReleaseID(%q) = %q, want %q", content, got, want)
		}
	}
}

func TestShutdownPowersOffAfterResponding(t *testing.T) {
	e := newTestEnv(t)
	if _, err := e.svc.Shutdown(bg, &agentproto.ShutdownRequest{}); !errors.Is(err, agentproto.ErrUnsupported) {
		t.Fatalf("shutdown without PowerOff: err = %v, want ErrUnsupported", err)
	}
	got := make(chan bool, 1)
	svc, err := NewService(Config{Reaper: testReaper, PowerOff: func(reboot bool) { got <- reboot }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Shutdown(bg, &agentproto.ShutdownRequest{Reboot: true}); err != nil {
		t.Fatal(err)
	}
	if reboot := <-got; !reboot {
		t.Fatal("PowerOff got reboot=false")
	}
}

func TestFindVirtioPort(t *testing.T) {
	dir := t.TempDir()
	for port, name := range map[string]string{"vport0p1": "org.qemu.guest_agent.0", "vport0p2": "org.osaurus.agent"} {
		os.MkdirAll(filepath.Join(dir, port), 0o755)
		writeFile(t, filepath.Join(dir, port, "name"), name+"\n", 0o644)
	}
	os.MkdirAll(filepath.Join(dir, "vport1p1"), 0o755) // no name file
	if dev, err := FindVirtioPort(dir, "org.osaurus.agent"); err != nil || dev != "/dev/vport0p2" {
		t.Fatalf("FindVirtioPort = %q, %v", dev, err)
	}
	if _, err := FindVirtioPort(dir, "missing"); !errors.Is(err, agentproto.ErrNotFound) {
		t.Fatalf("missing port: err = %v", err)
	}
}

// The served mux routes user_limit (the wrapper must pass it on).
func TestServedMuxHasUserLimit(t *testing.T) {
	if _, ok := any(recovering{}).(agentproto.LimitService); !ok {
		t.Fatal("recovering does not implement agentproto.LimitService: user_limit would be an unknown op")
	}
}
