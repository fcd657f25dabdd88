package secrets

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"
)

// flakyKeychain is a Backend in memory that can be made unreachable.
type flakyKeychain struct {
	m    map[string]string
	down bool
}

var errDown = errors.New("no Secret Service")

func (k *flakyKeychain) Set(svc, user, v string) error {
	if k.down {
		return errDown
	}
	k.m[svc+"|"+user] = v
	return nil
}

func (k *flakyKeychain) Get(svc, user string) (string, error) {
	if k.down {
		return "", errDown
	}
	v, ok := k.m[svc+"|"+user]
	if !ok {
		return "", keyring.ErrNotFound
	}
	return v, nil
}

func (k *flakyKeychain) Delete(svc, user string) error {
	if k.down {
		return errDown
	}
	if _, ok := k.m[svc+"|"+user]; !ok {
		return keyring.ErrNotFound
	}
	delete(k.m, svc+"|"+user)
	return nil
}

// TestRemovedAgentsSecretsAreNotInherited: when the keychain is
// unreachable as an agent is removed, its secrets are marked for removal
// and deleted before a later agent of the same name can see them.
func TestRemovedAgentsSecretsAreNotInherited(t *testing.T) {
	kc := &flakyKeychain{m: map[string]string{}}
	marks := filepath.Join(t.TempDir(), "config", "secrets-to-remove.json")
	s := &Store{B: kc, Marks: marks}
	if err := s.Set("alice", "OPENAI_API_KEY", "sk-old-alice-1"); err != nil {
		t.Fatal(err)
	}
	kc.down = true
	_, err := s.RemoveAll("alice")
	var marked *MarkedError
	if !errors.As(err, &marked) || !strings.Contains(err.Error(), "marked for removal") {
		t.Fatalf("RemoveAll with the keychain down: %v, want it marked", err)
	}
	// A new alice while the keychain is still down: nothing to read.
	if _, err := s.Get("alice", "OPENAI_API_KEY"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Get while marked and down: %v", err)
	}
	kc.down = false
	// Another process (a fresh Store on the same marks) sees the mark.
	s2 := &Store{B: kc, Marks: marks}
	if names, err := s2.List("alice"); err != nil || len(names) != 0 {
		t.Fatalf("the new alice's secrets: %v, %v; want none", names, err)
	}
	if _, err := s2.Get("alice", "OPENAI_API_KEY"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the old value: %v, want ErrNotFound", err)
	}
	if len(kc.m) != 0 {
		t.Errorf("left in the keychain: %v", kc.m)
	}
	// The mark is settled: the new alice's own secrets stay.
	if err := s2.Set("alice", "OPENAI_API_KEY", "sk-new-alice-2"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get("alice", "OPENAI_API_KEY"); err != nil || v != "sk-new-alice-2" {
		t.Fatalf("the new alice's secret: %q, %v", v, err)
	}
}

// TestValueOverLimitRefused: a value over the limit is refused whole,
// never cut and reported stored.
func TestValueOverLimitRefused(t *testing.T) {
	kc := &flakyKeychain{m: map[string]string{}}
	s := &Store{B: kc}
	big := strings.Repeat("x", MaxValueBytes+1)
	for name, set := range map[string]func() error{
		"agent": func() error { return s.Set("alice", "BIG", big) },
		"app":   func() error { return s.SetApp("BIG", big) },
	} {
		if err := set(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nothing was stored") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(kc.m) != 0 {
		t.Errorf("stored: %d entries", len(kc.m))
	}
	if err := s.Set("alice", "MAX", big[:MaxValueBytes]); err != nil {
		t.Errorf("a value at the limit: %v", err)
	}
}
