//go:build linux

package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/guestagent/account"
)

func TestAgentOfUser(t *testing.T) {
	for _, tc := range []struct {
		user string
		uid  int
		want string
	}{
		{"agent-alice", 1001, "alice"},
		{"agent-diag", 1000, "diag"},
		{"root", 0, ""},
		{"agent-sys", 999, ""},      // a system uid named like an agent
		{"agent-", 1002, ""},        // no name
		{"alice", 1003, ""},         // not an agent's user
		{"agent-nobody", 65534, ""}, // the overflow uid
		{"", 1004, ""},
	} {
		if got := AgentOfUser(tc.user, tc.uid); got != tc.want {
			t.Errorf("AgentOfUser(%q, %d) = %q, want %q", tc.user, tc.uid, got, tc.want)
		}
	}
}

// TestPeerIdentity reads the uid of a real connection from the kernel and
// names it from a passwd file.
func TestPeerIdentity(t *testing.T) {
	dir := t.TempDir()
	uid := os.Getuid()
	passwd := filepath.Join(dir, "passwd")
	line := "agent-carol:x:" + strconv.Itoa(uid) + ":" + strconv.Itoa(uid) + "::/home/carol:/bin/sh\n"
	if err := os.WriteFile(passwd, []byte("other:x:4242:4242::/:/bin/sh\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	req, _, err := peerIdentity(sc, passwd)
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	if uid >= 1000 && uid != 65534 { // nobody is no agent
		want = "carol"
	}
	if req.UID != uid || req.User != "agent-carol" || req.Agent != want {
		t.Errorf("identity %+v, want uid %d, user agent-carol, agent %q", req, uid, want)
	}
}

// A caller gets an HTTP answer naming the reason, not a dropped
// connection, when no host session is there to relay to.
func TestRelayWithoutHostAnswers503(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	if err := os.WriteFile(passwd, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := New(Config{Users: account.UserDB{Passwd: passwd}})
	sock := filepath.Join(dir, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { r.relayBridge(context.Background(), sc); close(done) }()
	if _, err := io.WriteString(c, "GET /v1/secrets HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	<-done
	var msg struct{ Error string }
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &msg) != nil || !strings.Contains(msg.Error, "not connected") {
		t.Errorf("got %d %s, want 503 with a JSON error saying the host is not connected", resp.StatusCode, body)
	}
}
