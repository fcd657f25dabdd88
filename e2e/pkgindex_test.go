//go:build linux

package e2e

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// The packages the test index serves: built by the test, so what pip and
// npm install never depends on what the machine's network reaches.
const (
	pipDemo = "osaurusdemo"  // import osaurusdemo; osaurusdemo.VALUE
	npmDemo = "osaurus-demo" // a bin printing "osaurus-demo ARGS"

	// indexAddr is where agents reach the index: an address of a network
	// namespace inside the VM (a documentation address, so nothing leaves
	// the VM) whose relay passes each connection to the test's server on
	// the host's loopback. Agents may not reach the host itself.
	indexAddr = "192.0.2.40"
)

// pkgIndex is a Python simple index and an npm registry the test serves
// on loopback, counting what was fetched.
type pkgIndex struct {
	mu   sync.Mutex
	hits map[string]int // by path
}

func (x *pkgIndex) fetched(path string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.hits[path]
}

// serveLocalPackageIndex starts the index and points the guest's pip
// (/etc/pip.conf) and npm (/etc/npmrc) at it, as an administrator of a
// machine with its own mirror would.
func serveLocalPackageIndex(t *testing.T, g *agentproto.Client) *pkgIndex {
	t.Helper()
	return serveLocalPackageIndexWith(t, g,
		map[string]string{pipDemo: "VALUE = \"from the test index\"\n"},
		map[string]string{npmDemo: "#!/usr/bin/env node\nconsole.log('osaurus-demo ' + process.argv.slice(2).join(' '))\n"})
}

// serveLocalPackageIndexWith serves a wheel (version 1.0.0) per entry of
// wheels (name: its __init__.py) and an npm package (1.0.0) per entry of
// npms (name: its cli.js). A later call on the same guest replaces an
// earlier one's index.
func serveLocalPackageIndexWith(t *testing.T, g *agentproto.Client, wheels, npms map[string]string) *pkgIndex {
	t.Helper()
	mux := http.NewServeMux()
	for name, init := range wheels {
		wheelName := name + "-1.0.0-py3-none-any.whl"
		wheel := buildWheel(t, name, "1.0.0", init)
		wheelSum := sha256.Sum256(wheel)
		mux.HandleFunc("GET /simple/"+name+"/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", wheelName, hex.EncodeToString(wheelSum[:]), wheelName)
		})
		mux.HandleFunc("GET /files/"+wheelName, func(w http.ResponseWriter, r *http.Request) { w.Write(wheel) })
	}
	for name, cli := range npms {
		tgz := buildNpmTarball(t, name, "1.0.0", cli)
		sha1Sum := sha1.Sum(tgz)
		sha512Sum := sha512.Sum512(tgz)
		tgzPath := "/" + name + "/-/" + name + "-1.0.0.tgz"
		packument, _ := json.Marshal(map[string]any{
			"name":      name,
			"dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": map[string]any{
				"name": name, "version": "1.0.0", "bin": map[string]string{name: "cli.js"},
				"dist": map[string]string{
					"tarball":   "http://" + indexAddr + tgzPath,
					"shasum":    hex.EncodeToString(sha1Sum[:]),
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512Sum[:]),
				},
			}},
		})
		mux.HandleFunc("GET /"+name, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(packument)
		})
		mux.HandleFunc("GET "+tgzPath, func(w http.ResponseWriter, r *http.Request) { w.Write(tgz) })
	}

	x := &pkgIndex{hits: map[string]int{}}
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "pong") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x.mu.Lock()
		x.hits[r.URL.Path]++
		x.mu.Unlock()
		mux.ServeHTTP(w, r) // anything else is a 404: an unknown package
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	// The relay opens its listening socket inside the namespace and then
	// returns to the VM's own, from where root reaches the host (10.0.2.2).
	relay := fmt.Sprintf(`import ctypes, os, socket, sys, threading
CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
home = os.open("/proc/self/ns/net", os.O_RDONLY)
if libc.setns(os.open("/run/netns/pkgidx", os.O_RDONLY), CLONE_NEWNET) != 0:
    sys.exit("setns pkgidx: errno %%d" %% ctypes.get_errno())
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((%q, 80))
ls.listen(64)
if libc.setns(home, CLONE_NEWNET) != 0:
    sys.exit("setns back: errno %%d" %% ctypes.get_errno())
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(c):
    try:
        u = socket.create_connection(("10.0.2.2", %d))
    except OSError:
        c.close()
        return
    t = threading.Thread(target=pump, args=(c, u), daemon=True)
    t.start()
    pump(u, c)
    t.join()
    c.close()
    u.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`, indexAddr, port)
	ctx := t.Context()
	if _, err := g.WriteFile(ctx, agentproto.WriteFileRequest{Path: "/run/pkgidx-relay.py", Data: []byte(relay)}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteFile(ctx, agentproto.WriteFileRequest{Path: "/etc/pip.conf",
		Data: []byte("[global]\nindex-url = http://" + indexAddr + "/simple/\ntrusted-host = " + indexAddr + "\n")}); err != nil {
		t.Fatal(err)
	}
	if out, errOut, st := sh(t, g, "", `set -e
# An earlier test's index on this (shared) guest: replaced.
[ -f /run/pkgidx-relay.pid ] && kill "$(cat /run/pkgidx-relay.pid)" 2>/dev/null || true
ip netns del pkgidx 2>/dev/null || true
ip link del pkv0 2>/dev/null || true
ip netns add pkgidx
ip link add pkv0 type veth peer name pkv1
ip link set pkv1 netns pkgidx
ip addr add 192.0.2.39/32 dev pkv0
ip link set pkv0 up
ip route add `+indexAddr+`/32 dev pkv0 src 192.0.2.39
ip netns exec pkgidx sh -c 'ip link set lo up; ip link set pkv1 up; ip addr add `+indexAddr+`/32 dev pkv1; ip route add 192.0.2.39/32 dev pkv1; ip route add default via 192.0.2.39'
grep -qx "registry=http://`+indexAddr+`/" /etc/npmrc 2>/dev/null || echo "registry=http://`+indexAddr+`/" >>/etc/npmrc
setsid python3 /run/pkgidx-relay.py </dev/null >/run/pkgidx-relay.log 2>&1 &
echo $! >/run/pkgidx-relay.pid
for i in $(seq 200); do [ "$(curl -s --max-time 2 http://`+indexAddr+`/ping)" = pong ] && exit 0; sleep 0.1; done
cat /run/pkgidx-relay.log; exit 1`); st.Code != 0 {
		t.Fatalf("the package index relay in the VM: %s %s %+v", out, errOut, st)
	}
	return x
}

// buildWheel makes a pure-Python wheel holding one module package.
func buildWheel(t *testing.T, name, version, init string) []byte {
	t.Helper()
	info := name + "-" + version + ".dist-info/"
	files := []struct{ path, body string }{
		{name + "/__init__.py", init},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: osaurus-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", info)
	w, err := zw.Create(info + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// buildNpmTarball makes an npm package tarball with one bin, cli.js.
func buildNpmTarball(t *testing.T, name, version, cli string) []byte {
	t.Helper()
	pj, _ := json.Marshal(map[string]any{"name": name, "version": version, "bin": map[string]string{name: "cli.js"}})
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		path, body string
		mode       int64
	}{{"package/package.json", string(pj), 0o644}, {"package/cli.js", cli, 0o755}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.path, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
