package agents

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A damaged agents.json is named with the way back; Repair keeps every
// agent it can still read and the damaged file beside the new one.
func TestRepairDamagedFile(t *testing.T) {
	good := func(t *testing.T) (string, []byte) {
		path := filepath.Join(t.TempDir(), FileName)
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"alice", "bob"} {
			if _, err := r.Add(n); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := os.ReadFile(path)
		return path, b
	}
	for _, tt := range []struct {
		name    string
		damage  func(b []byte) []byte
		problem string   // in Open's error
		kept    []string // agents left after Repair
	}{
		{"cut short in bob", func(b []byte) []byte { return b[:bytes.Index(b, []byte(`"bob"`))+10] }, "it ends in the middle", []string{"alice"}},
		{"uid a string", func(b []byte) []byte {
			i := bytes.LastIndex(b, []byte(`"uid": `))
			j := i + bytes.IndexByte(b[i:], ',')
			return append(append(append([]byte{}, b[:i]...), `"uid": "2001"`...), b[j:]...)
		}, `"uid" holds a string where a number belongs`, []string{"alice"}},
		{"not JSON", func([]byte) []byte { return []byte("garbage") }, "line 1: invalid character", nil},
		{"empty", func([]byte) []byte { return nil }, "ends in the middle", nil},
		{"bad token", func(b []byte) []byte { return bytes.Replace(b, []byte(`"token": "`), []byte(`"token": "zz`), 1) }, "token must be", []string{"bob"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path, b := good(t)
			damaged := tt.damage(b)
			os.WriteFile(path, damaged, 0o600)
			_, err := Open(path)
			var de *DamagedError
			if !errors.As(err, &de) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), path+" is damaged") ||
				!strings.Contains(err.Error(), tt.problem) || !strings.Contains(err.Error(), "`osaurus-sandbox agent repair`") ||
				strings.Contains(err.Error(), "Go struct") {
				t.Fatalf("open: %v", err)
			}
			res, err := Repair(path)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, a := range res.Kept {
				names = append(names, a.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.kept, ",") {
				t.Fatalf("kept %v, want %v (dropped %v)", names, tt.kept, res.Dropped)
			}
			if len(res.Dropped) == 0 {
				t.Error("no word on what was dropped")
			}
			if aside, _ := os.ReadFile(res.Aside); !bytes.Equal(aside, damaged) || !strings.HasPrefix(res.Aside, path+".damaged-") {
				t.Errorf("the damaged file is not kept at %s", res.Aside)
			}
			r, err := Open(path)
			if err != nil {
				t.Fatalf("open after repair: %v", err)
			}
			if len(r.List()) != len(tt.kept) {
				t.Fatalf("registry after repair: %v", r.List())
			}
			// The registry works again: a new agent gets a uid no kept
			// agent has.
			a, err := r.Add("carol")
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range res.Kept {
				if k.UID == a.UID {
					t.Fatalf("carol got %s's uid %d", k.Name, a.UID)
				}
			}
		})
	}
	// An intact file is left alone.
	path, b := good(t)
	if res, err := Repair(path); err != nil || res.Aside != "" || len(res.Kept) != 2 {
		t.Fatalf("repair of a good file: %+v %v", res, err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, b) {
		t.Fatal("repair rewrote a good file")
	}
}

// Names that differ only in case, spaces or punctuation fold to one slug:
// the second is refused, on add and on rename, so a slug typed on the
// command line always finds one agent.
func TestNamesThatFoldAlikeAreRefused(t *testing.T) {
	r := openTemp(t)
	da, err := r.Add("Data Analyst")
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := r.Add("bob")
	for _, name := range []string{"data-analyst", "data_analyst", "DATA  analyst!"} {
		if _, err := r.Add(name); err == nil || !strings.Contains(err.Error(), `too like agent "Data Analyst" (slug data-analyst)`) {
			t.Errorf("Add(%q): %v", name, err)
		}
		if _, err := r.Update("bob", func(a *Agent) error { a.Name = name; return nil }); err == nil || !strings.Contains(err.Error(), "too like") {
			t.Errorf("rename to %q: %v", name, err)
		}
	}
	if a, err := r.Get("data-analyst"); err != nil || a.ID != da.ID {
		t.Fatalf("the slug finds %v %v", a, err)
	}
	if a, err := r.Update(bob.ID, func(a *Agent) error { a.Name = "Data Analyst 2"; return nil }); err != nil || a.Slug != "bob" {
		t.Fatalf("a name that differs in a digit: %v %v", a, err)
	}
	if _, err := r.Update(da.ID, func(a *Agent) error { a.Name = "data analyst"; return nil }); err != nil {
		t.Fatalf("an agent's own name, recased: %v", err)
	}
}
