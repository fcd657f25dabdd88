package provision_test

import (
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/download"
	pt "github.com/osaurus/osaurus-sandbox/provision/provisiontest"
)

// The test guest provisions from a loopback HTTP server (Debian's kernel
// and its modules: the modular path) and a loopback OCI registry (root
// filesystem), then again with both stopped, from the cache.
func TestProvisionTestGuestFromRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes and pulls the whole test guest; not in -short mode")
	}
	ctx := testContext(t)
	g := pt.TestGuest(t, pt.ModularKernelManifest)
	p := &provision.Provisioner{
		Layout:   provision.Layout{Dir: t.TempDir()},
		Download: &download.Client{},
		Agent:    func(string) ([]byte, error) { return agent, nil },
	}
	st, err := p.Provision(ctx, g.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if want := "oci:" + digestOf(g.Ref); st.RootfsSHA256 != want {
		t.Errorf("RootfsSHA256 = %q, want %q", st.RootfsSHA256, want)
	}
	if len(st.Modules) == 0 {
		t.Error("no kernel modules resolved for the guest")
	}
	disk := p.Layout.RootDisk()
	// /etc/os-release is a symlink to it, which debugfs cat does not follow.
	osRelease, ok := pt.DiskFile(t, disk, "/usr/lib/os-release")
	if !ok || !strings.Contains(osRelease, "ID=debian") {
		t.Errorf("/usr/lib/os-release = %q, %v; want Debian's", osRelease, ok)
	}
	if got, ok := pt.DiskFile(t, disk, "/"+provision.AgentPathOnDisk); !ok || got != string(agent) {
		t.Errorf("/%s: present %v, %d bytes; want the agent", provision.AgentPathOnDisk, ok, len(got))
	}
	if typ, ok := pt.DiskType(t, disk, "/usr/bin/python3"); !ok || typ != "symlink" {
		t.Errorf("/usr/bin/python3: %q, %v; want the symlink Debian ships", typ, ok)
	}

	// Offline: kernel, modules and the image all come from the cache (the
	// OCI layout is read again even though the disk is kept).
	g.Close()
	again, err := p.Provision(ctx, g.Manifest)
	if err != nil {
		t.Fatalf("offline re-provision: %v", err)
	}
	if again.RootfsSHA256 != st.RootfsSHA256 {
		t.Errorf("offline re-provision recorded %q, first %q", again.RootfsSHA256, st.RootfsSHA256)
	}
	if _, ok := pt.DiskFile(t, disk, "/usr/lib/os-release"); !ok {
		t.Error("offline re-provision built a disk without /usr/lib/os-release")
	}
}
