package secrets_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/zalando/go-keyring"
)

// TestKeychain runs the store against a real Secret Service.
func TestKeychain(t *testing.T) {
	testkeyring.Start(t)
	s := secrets.NewKeychain()
	if err := s.Set("alice", "OPENAI_API_KEY", "sk-alice-123456"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("alice", "OTHER", "other-value"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get("alice", "OPENAI_API_KEY"); err != nil || v != "sk-alice-123456" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if _, err := s.Get("bob", "OPENAI_API_KEY"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("bob's Get: %v, want ErrNotFound", err)
	}
	if names, err := s.List("alice"); err != nil || !slices.Equal(names, []string{"OPENAI_API_KEY", "OTHER"}) {
		t.Fatalf("List = %v, %v", names, err)
	}
	if got := s.Scrub("alice", "key=sk-alice-123456 other=other-value"); got != "key=[REDACTED:OPENAI_API_KEY] other=[REDACTED:OTHER]" {
		t.Errorf("Scrub = %q", got)
	}
	if got := s.Scrub("bob", "key=sk-alice-123456"); got != "key=sk-alice-123456" {
		t.Errorf("bob's Scrub touched alice's value: %q", got)
	}
	if err := s.Remove("alice", "OTHER"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("alice", "OTHER"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("second Remove: %v, want ErrNotFound", err)
	}
	if names, _ := s.List("alice"); !slices.Equal(names, []string{"OPENAI_API_KEY"}) {
		t.Fatalf("List after remove = %v", names)
	}

	// Removing the agent removes all its secrets, and only its own.
	if err := s.Set("alice", "SECOND", "second-value"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("bob", "OPENAI_API_KEY", "sk-bob-1234567"); err != nil {
		t.Fatal(err)
	}
	gone, err := s.RemoveAll("alice")
	if err != nil || !slices.Equal(gone, []string{"OPENAI_API_KEY", "SECOND"}) {
		t.Fatalf("RemoveAll = %v, %v", gone, err)
	}
	for _, k := range []string{"OPENAI_API_KEY", "SECOND"} {
		// Straight from the keychain, not through the index.
		if _, err := keyring.Get(secrets.ServiceName(), "alice/"+k); !errors.Is(err, keyring.ErrNotFound) {
			t.Errorf("alice/%s still in the keychain: %v", k, err)
		}
	}
	if names, err := s.List("alice"); err != nil || len(names) != 0 {
		t.Errorf("List after RemoveAll = %v, %v", names, err)
	}
	if got := s.Scrub("alice", "x sk-alice-123456"); got != "x sk-alice-123456" {
		t.Errorf("a removed agent's old values are still remembered: %q", got)
	}
	if v, err := s.Get("bob", "OPENAI_API_KEY"); err != nil || v != "sk-bob-1234567" {
		t.Errorf("bob's secret after removing alice: %q, %v", v, err)
	}
	if gone, err := s.RemoveAll("alice"); err != nil || len(gone) != 0 {
		t.Errorf("second RemoveAll = %v, %v", gone, err)
	}
}

func TestScrubValues(t *testing.T) {
	vals := map[string]string{"KEY": "sk-test-123456", "SHORT": "abc", "LONG": "sk-test-123456-and-more"}
	// A cut prefix shared by two values is redacted under the longer one's
	// name; either way nothing of it shows.
	marker := "\n\n[... 100 bytes omitted of 200 ...]\n\n"
	for _, tc := range []struct{ name, in, want string }{
		{"whole", "a sk-test-123456 b", "a [REDACTED:KEY] b"},
		{"longer value first", "x sk-test-123456-and-more", "x [REDACTED:LONG]"},
		{"short values stay", "abc abc", "abc abc"},
		{"split across the cut", "out: sk-te" + marker + "3456 end", "out: [REDACTED:LONG]" + marker + "[REDACTED:KEY] end"},
		{"no marker, no partials", "ends with sk-te", "ends with sk-te"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := secrets.ScrubValues(vals, tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// flaky is a keychain that answers until it is switched off.
type flaky struct {
	m   map[string]string
	off bool
}

var errDown = errors.New("no Secret Service")

func (f *flaky) Set(_, user, v string) error {
	if f.off {
		return errDown
	}
	f.m[user] = v
	return nil
}

func (f *flaky) Get(_, user string) (string, error) {
	if f.off {
		return "", errDown
	}
	if v, ok := f.m[user]; ok {
		return v, nil
	}
	return "", keyring.ErrNotFound
}

func (f *flaky) Delete(_, user string) error { delete(f.m, user); return nil }

// TestScrubWithoutKeychain: a keychain that goes away still has the values
// seen before scrubbed, and a machine without one passes output through.
func TestScrubWithoutKeychain(t *testing.T) {
	f := &flaky{m: map[string]string{}}
	s := &secrets.Store{B: f}
	if err := s.Set("alice", "KEY", "sk-alice-123456"); err != nil {
		t.Fatal(err)
	}
	f.off = true
	if got := s.Scrub("alice", "x sk-alice-123456"); got != "x [REDACTED:KEY]" {
		t.Errorf("keychain down: %q", got)
	}
	if _, err := s.Get("alice", "KEY"); !errors.Is(err, secrets.ErrUnavailable) {
		t.Errorf("Get with the keychain down: %v, want ErrUnavailable", err)
	}
	none := &secrets.Store{B: &flaky{off: true}}
	if got := none.Scrub("bob", "plain output"); got != "plain output" {
		t.Errorf("no keychain: %q", got)
	}
}

func TestScrubValuesFindsEchoedForms(t *testing.T) {
	v := `Zq7X"kW9v&Pq/2m<x>`
	vals := map[string]string{"TOKEN": v}
	for _, text := range []string{
		`{"token":"Zq7X\"kW9v&Pq/2m<x>"}`,
		`{"token":"Zq7X\"kW9v\u0026Pq/2m\u003cx\u003e"}`,
		`GET /cb?t=Zq7X%22kW9v%26Pq%2F2m%3Cx%3E`,
		`GET /Zq7X%22kW9v&Pq%2F2m%3Cx%3E/x`,
	} {
		if got := secrets.ScrubValues(vals, text); strings.Contains(got, "kW9v") || !strings.Contains(got, "[REDACTED:TOKEN]") {
			t.Errorf("ScrubValues(%q) = %q", text, got)
		}
	}
}
