//go:build linux

package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
)

// TestInstallHostCLI: a start writes osaurus-host into the guest only when
// the guest's copy is not the app's (a new app, a lost or changed stamp,
// a binary of another size), and what it writes is what runs.
func TestInstallHostCLI(t *testing.T) {
	m := sharedGuest(t)
	g := m.Agent()
	ctx := context.Background()
	bin, err := assets.HostCLI(g.Info.Arch)
	if err != nil {
		t.Fatal(err)
	}
	other := append(bytes.Clone(bin), 0) // what a newer app would bring
	install := func(b []byte) bool {
		t.Helper()
		wrote, err := bridge.InstallHostCLI(ctx, g, b)
		if err != nil {
			t.Fatal(err)
		}
		return wrote
	}
	// Whatever this guest had, the app's copy is in after one call, and
	// a second call writes nothing.
	install(bin)
	t0 := time.Now()
	if install(bin) {
		t.Fatal("the guest's copy is the app's, and it was written again")
	}
	t1 := time.Now()
	if !install(other) {
		t.Fatal("another app's osaurus-host was not written")
	}
	t.Logf("a start with osaurus-host in place checks it in %v; writing it took %v", t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	if fi, err := g.Stat(ctx, agentproto.PathRequest{Path: bridge.HostCLIPath}); err != nil || fi.Size != int64(len(other)) || fi.UID != 0 || fi.Mode&0o777 != 0o755 {
		t.Fatalf("after the write: %+v %v", fi, err)
	}
	if !install(bin) {
		t.Fatal("going back to this app's copy wrote nothing")
	}
	// A binary of another size under a matching stamp is rewritten.
	if _, err := g.WriteFile(ctx, agentproto.WriteFileRequest{Path: bridge.HostCLIPath, Data: []byte("#!/bin/sh\n"), Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if !install(bin) {
		t.Fatal("a truncated osaurus-host was kept")
	}
	out, errOut, st, err := g.Output(ctx, agentproto.ExecRequest{Argv: []string{bridge.HostCLIPath, "--help"}})
	if err != nil || !bytes.Contains(append(out, errOut...), []byte("osaurus-host")) {
		t.Fatalf("the installed osaurus-host does not run: %v %+v %s %s", err, st, out, errOut)
	}
}
