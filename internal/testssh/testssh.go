// Package testssh stands in for ssh's -W in tests of previews forwarded
// over a remote context: the test binary, run as the context's ssh, is a
// TCP pipe to this machine's loopback, with the far side's preview an
// HTTP server here that checks its Host as the real one does.
package testssh

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// PidsEnv names the folder where each stand-in leaves a file named by its
// pid holding its arguments (Alive reads them).
const PidsEnv = "STANDIN_PIDS"

// RefuseEnv, when set, makes ForwardW fail as ssh does against an sshd
// that forbids forwarding.
const RefuseEnv = "STANDIN_REFUSE"

// Record notes this stand-in's pid and args in $STANDIN_PIDS, when set.
func Record(args []string) {
	if dir := os.Getenv(PidsEnv); dir != "" {
		os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), []byte(strings.Join(args, " ")), 0o644)
	}
}

// ForwardW is `ssh -W target` with this machine as the far side: stdin
// and stdout become one TCP connection to target, which must be on
// 127.0.0.1. It returns the exit code.
func ForwardW(target string) int {
	if os.Getenv(RefuseEnv) != "" {
		fmt.Fprintln(os.Stderr, "channel 0: open failed: administratively prohibited: open failed\nstdio forwarding failed")
		return 255
	}
	if !strings.HasPrefix(target, "127.0.0.1:") {
		fmt.Fprintln(os.Stderr, "stand-in ssh: -W to", target, "is not the far side's loopback")
		return 255
	}
	c, err := net.Dial("tcp", target)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 255
	}
	go func() {
		io.Copy(c, os.Stdin)
		c.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(os.Stdout, c)
	return 0
}

// Alive lists the stand-ins that recorded themselves in pids and still
// run (or are not yet waited for), with their arguments.
func Alive(pids string) []string {
	ents, _ := os.ReadDir(pids)
	var alive []string
	for _, e := range ents {
		pid, _ := strconv.Atoi(e.Name())
		if syscall.Kill(pid, 0) == nil {
			b, _ := os.ReadFile(filepath.Join(pids, e.Name()))
			alive = append(alive, fmt.Sprintf("%d: ssh %s", pid, b))
		}
	}
	return alive
}

// FarPreview stands for the far side's preview server: like it, it
// answers only requests addressed to its own 127.0.0.1:PORT or
// localhost:PORT. /go redirects to /there on the address asked; any
// other path answers "hello from the far preview, PATH".
func FarPreview(t testing.TB) (port int) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
		if r.Host != "127.0.0.1:"+port && r.Host != "localhost:"+port {
			http.Error(w, "refused Host "+r.Host, http.StatusForbidden)
			return
		}
		if r.URL.Path == "/go" {
			http.Redirect(w, r, "http://"+r.Host+"/there", http.StatusFound)
			return
		}
		fmt.Fprintf(w, "hello from the far preview, %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// Get asks url with Host host ("" the URL's) through c, failing t when
// no answer comes; it returns the status, the body and the headers.
func Get(t testing.TB, c *http.Client, url, host string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// NoRedirects is a client that shows redirects instead of following them.
func NoRedirects() *http.Client {
	return &http.Client{Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
