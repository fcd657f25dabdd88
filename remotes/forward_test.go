package remotes

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/internal/testssh"
)

// TestMain runs this test binary as the stand-in of `ssh -W` when a test
// makes it the forwards' ssh (standInForwards).
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "standin-ssh-w" {
		testssh.Record(os.Args[2:])
		os.Exit(testssh.ForwardW(os.Args[2]))
	}
	os.Exit(m.Run())
}

// standInForwards are forwards of context box whose ssh is this test
// binary (TestMain).
func standInForwards(t *testing.T) *Forwards {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &Forwards{CtxName: "box", Argv: func(p int) []string { return []string{self, "standin-ssh-w", "127.0.0.1:" + strconv.Itoa(p)} }}
}

// TestPreviewForward: a forward through the stand-in ssh reaches the far
// preview on its own address, refuses requests to other names, points
// the far preview's redirects at itself, is opened once per far port,
// says why ssh failed (with the fix for a far sshd that forbids
// forwarding), and leaves no ssh running once closed.
func TestPreviewForward(t *testing.T) {
	pids := t.TempDir()
	t.Setenv(testssh.PidsEnv, pids)
	farPort := testssh.FarPreview(t)
	fs := standInForwards(t)
	lp, err := fs.Open(farPort)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := fs.Open(farPort); again != lp || err != nil {
		t.Fatalf("the same far port again: %d %v, want %d", again, err, lp)
	}
	for _, bad := range []int{0, -1, 65536} {
		if _, err := fs.Open(bad); err == nil {
			t.Errorf("port %d forwarded", bad)
		}
	}
	local := "http://127.0.0.1:" + strconv.Itoa(lp)
	c := testssh.NoRedirects()
	defer c.CloseIdleConnections()
	if code, body, _ := testssh.Get(t, c, local+"/page", ""); code != 200 || body != "hello from the far preview, /page" {
		t.Fatalf("GET through the forward: %d %q", code, body)
	}
	if code, body, _ := testssh.Get(t, c, local+"/page", "localhost:"+strconv.Itoa(lp)); code != 200 {
		t.Fatalf("GET as localhost: %d %q", code, body)
	}
	if code, body, _ := testssh.Get(t, c, local+"/", "rebound.example:"+strconv.Itoa(lp)); code != 403 || !strings.Contains(body, "answers only requests to "+local+"/") {
		t.Fatalf("a request to another name: %d %q", code, body)
	}
	if code, _, h := testssh.Get(t, c, local+"/go", ""); code != 302 || h.Get("Location") != local+"/there" {
		t.Fatalf("redirect: %d Location %q", code, h.Get("Location"))
	}
	if len(testssh.Alive(pids)) == 0 {
		t.Fatal("no ssh carried the requests")
	}

	t.Setenv(testssh.RefuseEnv, "1")
	other := testssh.FarPreview(t)
	lp2, err := fs.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	code, body, _ := testssh.Get(t, c, "http://127.0.0.1:"+strconv.Itoa(lp2)+"/", "")
	if code != 502 || !strings.Contains(body, "administratively prohibited") || !strings.Contains(body, "AllowTcpForwarding") || !strings.Contains(body, "context box") {
		t.Fatalf("a far sshd that forbids forwarding: %d %q", code, body)
	}

	fs.CloseAll()
	if alive := testssh.Alive(pids); len(alive) != 0 {
		t.Fatalf("ssh left running after the forwards closed: %q", alive)
	}
	if _, err := fs.Open(farPort); err == nil {
		t.Fatal("a forward opened after CloseAll")
	}
	if _, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(lp)); err == nil {
		t.Fatal("the local port still listens after CloseAll")
	}
}
