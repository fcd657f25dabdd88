package remotes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// farFake serves the reviewed content of good.txt only, and answers an
// apply with done (nil: what it was asked).
type farFake struct {
	done  []string
	asked [][]string
}

func (*farFake) OpenProjectFile(_ context.Context, req control.ProjectFileRequest) (io.ReadCloser, error) {
	if req.Path == "good.txt" {
		return io.NopCloser(strings.NewReader("good")), nil
	}
	return io.NopCloser(strings.NewReader("other")), nil
}

func (f *farFake) ApplyChanges(_ context.Context, req api.ViewRequest) (*projects.Result, error) {
	f.asked = append(f.asked, req.Apply.Paths)
	done := f.done
	if done == nil {
		done = req.Apply.Paths
	}
	return &projects.Result{Done: done}, nil
}

// ApplyUploaded writes only the reviewed content into the recorded
// folder, asks the far side for exactly what it wrote, and sorts the
// answer: applied, still pending there, and paths it was never asked.
func TestApplyUploaded(t *testing.T) {
	ctx := context.Background()
	box := Context{Name: "box", URL: "ssh://me@box"}
	links := Links{Path: LinksPath(t.TempDir())}
	dir := t.TempDir()
	add := func(p, body string) projects.Change {
		h := sha256.Sum256([]byte(body))
		return projects.Change{Path: p, Kind: projects.Added, Type: projects.TypeFile, Size: int64(len(body)), Hash: hex.EncodeToString(h[:]), Mode: 0o644}
	}
	cs := &projects.ChangeSet{Review: "0123456789abcdef0123456789abcdef", Changes: []projects.Change{add("good.txt", "good"), add("bad.txt", "good")}}
	a, p := agents.Agent{ID: "id-1", Slug: "alice"}, projects.Project{Name: "app"}
	o := projects.ApplyOptions{Review: cs.Review}

	// No record here: nothing is tried.
	far := &farFake{}
	if _, err := ApplyUploaded(ctx, far, box, links, a, p, cs, o); !errors.Is(err, ErrNoFolder) || len(far.asked) != 0 {
		t.Fatalf("no record: %v, asked %v", err, far.asked)
	}
	if err := links.Set(box, "app", dir); err != nil {
		t.Fatal(err)
	}
	// Recorded for another address of the context: nothing is tried.
	if _, err := ApplyUploaded(ctx, far, Context{Name: "box", URL: "ssh://other"}, links, a, p, cs, o); err == nil || len(far.asked) != 0 {
		t.Fatalf("another address: %v, asked %v", err, far.asked)
	}
	// Another review than the one shown.
	if _, err := ApplyUploaded(ctx, far, box, links, a, p, cs, projects.ApplyOptions{Review: "fedcba9876543210fedcba9876543210"}); err == nil || len(far.asked) != 0 {
		t.Fatalf("another review: %v, asked %v", err, far.asked)
	}

	far.done = []string{"good.txt", "unasked.txt"}
	out, err := ApplyUploaded(ctx, far, box, links, a, p, cs, o)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "good.txt")); string(b) != "good" {
		t.Errorf("good.txt: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bad.txt written: %v", err)
	}
	if len(far.asked) != 1 || !slices.Equal(far.asked[0], []string{"good.txt"}) {
		t.Errorf("asked %v, want only what was written", far.asked)
	}
	if out.Dir != dir || !slices.Equal(out.Applied, []string{"good.txt"}) || !slices.Equal(out.Unasked, []string{"unasked.txt"}) ||
		len(out.Here.Refused) != 1 || out.Problems() != 2 {
		t.Errorf("outcome %+v (here %+v)", out, out.Here)
	}

	// The far side applies nothing: what was written here is pending.
	far.done, far.asked = []string{}, nil
	out, err = ApplyUploaded(ctx, far, box, links, a, p, cs, projects.ApplyOptions{Review: cs.Review, Paths: []string{"./good.txt"}})
	if err != nil || !slices.Equal(out.Pending, []string{"good.txt"}) || len(out.Applied) != 0 {
		t.Errorf("pending: %+v %v", out, err)
	}
	if _, err := PickChanges(cs, []string{"nope.txt"}); !errors.Is(err, projects.ErrInvalid) {
		t.Errorf("a path not among the changes: %v", err)
	}
}
