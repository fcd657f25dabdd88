package agents

import (
	"errors"
	"testing"
)

// A Mirror lists what fetch says, follows it on Reload, never writes,
// and has no tokens to give.
func TestMirror(t *testing.T) {
	list := []Agent{{ID: "a1", Name: "alice", Slug: "alice"}}
	r, err := Mirror(func() ([]Agent, error) { return list, nil })
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	defer r.Subscribe(func() { n++ })()
	if got := r.List(); len(got) != 1 || got[0].Name != "alice" {
		t.Fatalf("List = %v", got)
	}
	list = append(list, Agent{ID: "b2", Name: "bob", Slug: "bob"})
	if err := r.ReloadIfChanged(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get("bob"); err != nil || n != 1 {
		t.Fatalf("after reload: %v, %d notifications", err, n)
	}
	if _, err := r.Add("carol"); err == nil {
		t.Error("a mirror took a change")
	}
	if _, err := r.Token("alice"); err == nil {
		t.Error("a mirror gave a token")
	}
	boom := errors.New("link lost")
	r2, _ := Mirror(func() ([]Agent, error) { return list, nil })
	r2.fetch = func() ([]Agent, error) { return nil, boom }
	if err := r2.Reload(); !errors.Is(err, boom) || len(r2.List()) != 2 {
		t.Errorf("a failed fetch: %v, kept %d", err, len(r2.List()))
	}
}
