package agents

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Uids are handed out once: removing an agent never frees its uid for the
// next one, and they survive reopening the file.
func TestUIDsAreNeverReused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := r.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	if alice.UID != FirstUID {
		t.Fatalf("alice uid = %d, want %d", alice.UID, FirstUID)
	}
	if _, err := r.Remove("alice"); err != nil {
		t.Fatal(err)
	}
	bob, err := r.Add("bob")
	if err != nil {
		t.Fatal(err)
	}
	if bob.UID == alice.UID {
		t.Fatalf("bob got removed alice's uid %d", bob.UID)
	}
	r2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r2.Get("bob"); got.UID != bob.UID {
		t.Fatalf("bob's uid after reopening = %d, want %d", got.UID, bob.UID)
	}
	carol, err := r2.Add("carol")
	if err != nil {
		t.Fatal(err)
	}
	if carol.UID == alice.UID || carol.UID == bob.UID {
		t.Fatalf("carol uid %d reuses alice %d or bob %d", carol.UID, alice.UID, bob.UID)
	}
	if _, err := r2.Update("carol", func(a *Agent) error { a.UID = alice.UID; return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("changing the uid: err = %v, want ErrInvalid", err)
	}
}

func TestAddWithLeftOverHome(t *testing.T) {
	ws := t.TempDir()
	r := openTemp(t)
	o := AddOptions{Workspace: ws}
	alice, err := r.AddWith("alice", o)
	if err != nil {
		t.Fatal(err)
	}
	home := HostHome(ws, "alice")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "secret"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Remove("alice"); err != nil {
		t.Fatal(err)
	}

	_, err = r.AddWith("alice", o)
	if !errors.Is(err, ErrHomeExists) || !strings.Contains(err.Error(), "--adopt-home") || !strings.Contains(err.Error(), "--purge-home") {
		t.Fatalf("add over a left-over home: err = %v, want ErrHomeExists naming both flags", err)
	}
	if len(r.List()) != 0 {
		t.Fatalf("the refused add left an agent: %+v", r.List())
	}

	// Adopting gets the removed agent's uid back: its files are already
	// that uid's.
	o.Home = HomeAdopt
	again, err := r.AddWith("alice", o)
	if err != nil {
		t.Fatal(err)
	}
	if again.UID != alice.UID || !again.AdoptHome {
		t.Fatalf("adopted: uid %d adopt %v, want uid %d adopt true", again.UID, again.AdoptHome, alice.UID)
	}
	if _, err := os.Stat(filepath.Join(home, "secret")); err != nil {
		t.Fatalf("adopting lost the file: %v", err)
	}
	if _, err := r.Remove("alice"); err != nil {
		t.Fatal(err)
	}

	o.Home = HomePurge
	fresh, err := r.AddWith("alice", o)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.UID == alice.UID || fresh.AdoptHome {
		t.Fatalf("purged: uid %d adopt %v, want a new uid, no adoption", fresh.UID, fresh.AdoptHome)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Fatalf("purge kept the home: %v", err)
	}
}

// Agents written before uids were fixed get them on load, the same in
// every process, and keep them once saved.
func TestUIDMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	tok := strings.Repeat("ab", tokenBytes)
	old := `{"version":1,"agents":[
 {"id":"1","name":"a","slug":"a","autonomousExec":{"maxCommandsPerTurn":10,"network":"none"},"createdAt":"2026-01-01T00:00:00Z","token":"` + tok + `"},
 {"id":"2","name":"b","slug":"b","autonomousExec":{"maxCommandsPerTurn":10,"network":"none"},"createdAt":"2026-01-02T00:00:00Z","token":"` + strings.Repeat("cd", tokenBytes) + `"}]}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	r1, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a1, _ := r1.Get("a")
	a2, _ := r2.Get("a")
	b1, _ := r1.Get("b")
	if a1.UID != FirstUID || b1.UID != FirstUID+1 || a2.UID != a1.UID || !a1.AdoptHome {
		t.Fatalf("migrated uids a=%d/%d b=%d adopt=%v", a1.UID, a2.UID, b1.UID, a1.AdoptHome)
	}
	c, err := r1.Add("c")
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != FirstUID+2 {
		t.Fatalf("c uid = %d, want %d", c.UID, FirstUID+2)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"uid": 10000`) {
		t.Fatalf("migrated uids not saved:\n%s", b)
	}
}

func TestDiskGBValidation(t *testing.T) {
	r := openTemp(t)
	if _, err := r.Add("a"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		gb   float64
		want error
	}{{0.05, nil}, {10, nil}, {0.001, ErrInvalid}, {-1, ErrInvalid}, {1e9, ErrInvalid}} {
		_, err := r.Update("a", func(a *Agent) error { a.DiskGB = tc.gb; return nil })
		if !errors.Is(err, tc.want) || err != nil && !strings.Contains(err.Error(), "diskGB") {
			t.Errorf("diskGB %g: err = %v, want %v", tc.gb, err, tc.want)
		}
	}
	a, _ := r.Get("a")
	if a.DiskQuota() != 10e9 {
		t.Fatalf("quota = %d", a.DiskQuota())
	}
}
