package explain

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/errdefs"
)

func TestError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		// want are substrings of Short(); none of them may be the raw
		// error's own words unless listed.
		want []string
		// raw marks an error no rule knows: Short is the raw text.
		raw bool
	}{
		{"x509 typed", fmt.Errorf("GET https://dl-cdn.example.org/x: %w", x509.UnknownAuthorityError{}),
			[]string{"certificate isn't trusted (dl-cdn.example.org)", "corporate proxy", "SSL_CERT_FILE"}, false},
		{"x509 over the socket", errors.New(`provision: Get "https://dl-cdn.example.org/a.tar.gz": tls: failed to verify certificate: x509: certificate signed by unknown authority`),
			[]string{"certificate isn't trusted (dl-cdn.example.org)", "update-ca-certificates"}, false},
		{"certificate name", errors.New("x509: certificate is valid for a.example, not b.example"), []string{"another name", "captive portal"}, false},
		{"expired", errors.New("x509: certificate has expired or is not yet valid: current time ..."), []string{"expired", "clock"}, false},
		{"importer redirects", errors.New("https://github.example/x: more than 5 redirects"), []string{"too many redirects (github.example)", "browser"}, false},
		{"net/http redirects", errors.New(`Get "https://a.example/m.json": stopped after 10 redirects`), []string{"too many redirects (a.example)"}, false},
		{"deadline typed", fmt.Errorf("fetch manifest: %w", context.DeadlineExceeded), []string{"took too long", "HTTPS_PROXY"}, false},
		{"deadline text", errors.New(`Get "https://a.example/": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`), []string{"took too long and was given up (a.example)"}, false},
		{"atomic write temp", errors.New("open /home/u/.osaurus-sandbox/.sandbox.json.tmp-284719: permission denied"),
			[]string{"/home/u/.osaurus-sandbox/sandbox.json was not saved", "aren't allowed to write", "unchanged"}, false},
		{"atomic write full disk", errors.New("write /d/.agents.json.tmp-1: no space left on device"), []string{"disk is full", "/d/.agents.json.tmp-1"}, false},
		{"html page", errors.New("manifest: invalid character '<' looking for beginning of value"), []string{"web page instead of the data", "Wi-Fi login"}, false},
		{"html body", errors.New("inference: 502: <!DOCTYPE html><html><body>Bad gateway</body></html>"), []string{"web page instead"}, false},
		{"404", errors.New("GET https://mirror.example/x.tar.gz: unexpected HTTP status 404 Not Found"), []string{"no file at that address (mirror.example) (HTTP 404)", "imageManifest"}, false},
		{"manifest 404", errors.New("image manifest https://img.example/m.json: GET https://img.example/m.json: 404 Not Found"), []string{"no file at that address (img.example) (HTTP 404)"}, false},
		{"503", errors.New("GET https://mirror.example/x: unexpected HTTP status 503 Service Unavailable"), []string{"problem of its own", "later"}, false},
		{"dns typed", &net.OpError{Op: "dial", Err: &net.DNSError{Name: "dl-cdn.example.org", Err: "no such host", IsNotFound: true}}, []string{"The name dl-cdn.example.org couldn't be looked up", "online"}, false},
		{"dns text", errors.New(`Get "https://x.example/": dial tcp: lookup x.example on 127.0.0.53:53: no such host`), []string{"The name x.example couldn't be looked up"}, false},
		{"refused typed", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, []string{"Nothing answers", "port"}, false},
		{"refused text", errors.New(`Post "http://127.0.0.1:8080/v1/chat": dial tcp 127.0.0.1:8080: connect: connection refused`), []string{"Nothing answers at that address (127.0.0.1:8080)"}, false},
		{"disk full typed", &fs.PathError{Op: "write", Path: "/data/vm/rootfs.img", Err: syscall.ENOSPC}, []string{"disk is full", "/data/vm/rootfs.img"}, false},
		{"permission", &fs.PathError{Op: "open", Path: "/data/sandbox.json", Err: syscall.EACCES}, []string{"isn't allowed to use /data/sandbox.json"}, false},
		{"unknown", errors.New("cpus: 12, allowed 1–8"), []string{"cpus: 12, allowed 1–8"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := Error(tc.err)
			if ex.Known() == tc.raw {
				t.Fatalf("Known() = %v for %q", ex.Known(), tc.err)
			}
			if ex.Detail != tc.err.Error() {
				t.Errorf("Detail %q, want the raw error", ex.Detail)
			}
			got := ex.Short()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Short() = %q\nlacks %q", got, w)
				}
			}
			if !tc.raw {
				if strings.Contains(got, tc.err.Error()) {
					t.Errorf("the sentence repeats the raw error: %q", got)
				}
				if l := ex.Long(); !strings.HasSuffix(l, "\nDetail: "+tc.err.Error()) {
					t.Errorf("Long() lacks the detail line: %q", l)
				}
			}
		})
	}
}

func TestNil(t *testing.T) {
	if ex := Error(nil); ex.Known() || ex.Short() != "" {
		t.Fatalf("nil explains as %+v", ex)
	}
}

// The module's sentinels are known by identity and class, not by their
// words: a registered sentinel is explained wrapped, and a registered
// class after crossing a wire; an unregistered error with the same text
// is not.
func TestRegistered(t *testing.T) {
	noApp := errdefs.Class(errdefs.ErrUnavailable, "no test app is running")
	Register(noApp, "The test app isn't running.", "Start it.")
	Register(errdefs.ErrTooLarge, "It is too large.", "Make it smaller.")
	for _, tc := range []struct {
		name     string
		err      error
		sentence string
	}{
		{"sentinel", noApp, "The test app isn't running."},
		{"wrapped", fmt.Errorf("dial /d/run/control.sock: %w: connection refused", noApp), "The test app isn't running."},
		{"class over the wire", &agentproto.RemoteError{Op: "x", Code: "too_large", Message: "file of 9 GiB"}, "It is too large."},
		{"same words, not the sentinel", errors.New("no test app is running"), ""},
		{"same class, another sentinel", errdefs.Class(errdefs.ErrUnavailable, "no test app is running"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := Error(tc.err)
			if ex.Sentence != tc.sentence || ex.Detail != tc.err.Error() {
				t.Errorf("%+v, want the sentence %q", ex, tc.sentence)
			}
		})
	}
}
