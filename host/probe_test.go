package host

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/provision"
)

// Without an owner, status describes the files on disk: nothing
// provisioned, then a provisioned VM that is stopped.
func TestProbeWithoutOwner(t *testing.T) {
	p := config.Paths{Root: t.TempDir()}
	if st := Probe(p); st.Owner != "none" || st.State != control.NotProvisioned || st.Adoptable {
		t.Fatalf("fresh data folder: %+v", st)
	}
	l := provision.Layout{Dir: p.ContainerDir()}
	for _, f := range []string{l.Kernel(), l.Initramfs(), l.RootDisk()} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(l.StateFile(), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := Probe(p); st.Owner != "none" || st.State != control.Stopped || st.Adoptable {
		t.Fatalf("provisioned data folder: %+v", st)
	}
}
