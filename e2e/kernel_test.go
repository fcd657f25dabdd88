//go:build linux

package e2e

import (
	"context"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// TestModularKernel: an image that brings its own modular kernel (the
// test guest's Debian cloud kernel, with virtio, FUSE and VirtioFS as
// modules) still provisions and boots: the modules go into the
// initramfs, the guest loads them, the shares and the network work, and
// module loading is off once the guest is up. The other e2e tests boot
// the product's own kernel, which has everything built in.
func TestModularKernel(t *testing.T) {
	requireGuest(t)
	srv := newSwitchableServer(t)
	p := copyContainer(t)
	layout := provision.Layout{Dir: p.ContainerDir()}
	if err := os.Remove(layout.StateFile()); err != nil { // provisioned with our kernel: start over
		t.Fatal(err)
	}
	m := newTestManager(t, p, srv, sandbox.Options{Logf: log.Printf})
	setSandboxConfig(t, p, func(c *config.Sandbox) { c.ImageManifest = srv.URL + "/manifest-debian-kernel.json" })
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background(), true) })
	st, err := (&provision.Provisioner{Layout: layout}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Modules) == 0 {
		t.Fatalf("provisioned with no modules from a modular kernel: %+v", st)
	}
	a := runningAgent(t, m)
	if len(a.Info.Warnings) > 0 {
		t.Errorf("boot warnings: %v", a.Info.Warnings)
	}
	run := func(cmd string) string {
		t.Helper()
		out, errOut, es, err := a.Output(ctx, agentproto.ExecRequest{Shell: cmd})
		if err != nil || es.Code != 0 {
			t.Fatalf("%s: %v %+v %s", cmd, err, es, errOut)
		}
		return string(out)
	}
	mods := run("cut -d' ' -f1 /proc/modules")
	for _, want := range []string{"virtio_pci", "virtio_blk", "virtiofs", "fuse"} {
		if !strings.Contains("\n"+mods, "\n"+want+"\n") {
			t.Errorf("module %s not loaded; loaded: %q", want, mods)
		}
	}
	// A share works both ways.
	run("echo from-guest > /workspace/modular.txt")
	if b, err := os.ReadFile(filepath.Join(p.Workspace(), "modular.txt")); err != nil || string(b) != "from-guest\n" {
		t.Errorf("the workspace share: %q, %v", b, err)
	}
	// The network policy's modules load after the handshake; module
	// loading is off once they are in.
	waitFor(t, "module loading off", 2*time.Minute, func() bool {
		return strings.TrimSpace(run("cat /proc/sys/kernel/modules_disabled")) == "1"
	})
	for _, want := range []string{"nf_tables", "veth"} {
		if mods := run("cut -d' ' -f1 /proc/modules"); !strings.Contains("\n"+mods, "\n"+want+"\n") {
			t.Errorf("policy module %s not loaded; loaded: %q", want, mods)
		}
	}
}
