package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func openTemp(t *testing.T) *Registry {
	t.Helper()
	r, err := Open(filepath.Join(t.TempDir(), "config", FileName))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAddDefaults(t *testing.T) {
	r := openTemp(t)
	a, err := r.Add("  Research Bot ")
	if err != nil {
		t.Fatal(err)
	}
	want := AutonomousExec{Enabled: false, MaxCommandsPerTurn: 10, PluginCreate: true, BackgroundProcesses: true, Network: "outbound"}
	if a.AutonomousExec != want {
		t.Fatalf("AutonomousExec = %+v, want %+v", a.AutonomousExec, want)
	}
	if a.Name != "Research Bot" || a.Slug != "research-bot" {
		t.Fatalf("name/slug = %q/%q", a.Name, a.Slug)
	}
	if a.User() != "agent-research-bot" || a.Home() != "/workspace/agents/research-bot" {
		t.Fatalf("user/home = %s %s", a.User(), a.Home())
	}
	if p := a.Paths(); p.Home != a.Home() {
		t.Fatalf("Paths().Home = %s", p.Home)
	}
	if len(a.ID) != 36 || a.ID[14] != '4' || strings.Count(a.ID, "-") != 4 {
		t.Fatalf("id %q is not a v4 UUID", a.ID)
	}
	if a.CreatedAt.IsZero() {
		t.Fatal("createdAt not set")
	}
	tok, err := r.Token(a.ID)
	if err != nil || !validToken(tok) {
		t.Fatalf("token %q, %v", tok, err)
	}
	// The Agent itself never carries the token.
	b, _ := json.Marshal(a)
	if strings.Contains(string(b), tok) || strings.Contains(string(b), "token") {
		t.Fatalf("Agent JSON leaks the token: %s", b)
	}
}

func TestSlugify(t *testing.T) {
	tests := []struct{ name, want string }{
		{"Bob", "bob"},
		{"Research Bot 2", "research-bot-2"},
		{"  --Hello,   World!--", "hello-world"},
		{"Élodie Müller", "elodie-muller"},
		{"日本語", "agent"},
		{"!!!", "agent"},
		{"a_b.c", "a-b-c"},
		{"A very long agent name that keeps going", "a-very-long-agent-name-t"},
		{"abcdefghijklmnopqrstuvw xyz", "abcdefghijklmnopqrstuvw"}, // no trailing dash after the cut
	}
	for _, tt := range tests {
		got := Slugify(tt.name)
		if got != tt.want {
			t.Errorf("Slugify(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if !ValidSlug(got) {
			t.Errorf("Slugify(%q) = %q is not a valid slug", tt.name, got)
		}
	}
}

func TestSlugsAreUnique(t *testing.T) {
	r := openTemp(t)
	long := strings.Repeat("x", 30)
	var slugs []string
	for _, name := range []string{"Bob", "diag", long, long + "1", long + "2"} {
		a, err := r.Add(name)
		if err != nil {
			t.Fatalf("Add(%q): %v", name, err)
		}
		slugs = append(slugs, a.Slug)
	}
	want := []string{"bob", "diag-2", strings.Repeat("x", 24), strings.Repeat("x", 22) + "-2", strings.Repeat("x", 22) + "-3"}
	if fmt.Sprint(slugs) != fmt.Sprint(want) {
		t.Fatalf("slugs = %v\nwant    %v", slugs, want)
	}
	for _, s := range slugs {
		if !ValidSlug(s) || len("agent-"+s) > 32 {
			t.Errorf("slug %q unusable as a user name", s)
		}
	}
}

func TestValidationMessages(t *testing.T) {
	r := openTemp(t)
	a, err := r.Add("Bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add("Alice"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		fn   func(*Agent)
		want string
	}{
		{"zero commands", func(a *Agent) { a.AutonomousExec.MaxCommandsPerTurn = 0 }, "maxCommandsPerTurn: 0, want 1–100"},
		{"too many commands", func(a *Agent) { a.AutonomousExec.MaxCommandsPerTurn = 101 }, "maxCommandsPerTurn: 101, want 1–100"},
		{"empty name", func(a *Agent) { a.Name = " " }, "name: empty, want 1–64 printable characters"},
		{"long name", func(a *Agent) { a.Name = strings.Repeat("n", 65) }, "name: 65 characters, want 1–64 printable characters"},
		{"control in name", func(a *Agent) { a.Name = "a\nb" }, `name: "a\nb", want 1–64 printable characters`},
		{"duplicate name", func(a *Agent) { a.Name = "ALICE" }, `name: "ALICE", already used by agent alice, want a name no other agent has`},
		{"slug", func(a *Agent) { a.Slug = "robert" }, `slug: "robert", want "bob" (it names the Linux user and home, so it can't change; add a new agent instead)`},
		{"id", func(a *Agent) { a.ID = "x" }, "id: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Update(a.ID, func(a *Agent) error { tt.fn(a); return nil })
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("message = %q\nwant        %q", err.Error(), tt.want)
			}
		})
	}
	got, err := r.Get(a.ID)
	if err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("a refused update changed the agent: %+v, %v", got, err)
	}
	if _, err := r.Add("bob"); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("Add of a duplicate name: %v", err)
	}
	if _, err := r.Add(""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Add(\"\"): %v", err)
	}
	// fn's own error aborts the update unchanged.
	boom := errors.New("boom")
	if _, err := r.Update(a.ID, func(a *Agent) error { a.Name = "Zed"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if got, _ := r.Get(a.ID); got.Name != "Bob" {
		t.Fatalf("name = %q after failed update", got.Name)
	}
}

func TestPersistence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cfg", FileName)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.List()) != 0 {
		t.Fatal("new registry not empty")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("Open created the file: %v", err)
	}
	bob, _ := r.Add("Bob")
	alice, _ := r.Add("Alice")
	if _, err := r.Update("bob", func(a *Agent) error {
		a.AutonomousExec.Enabled = true
		a.AutonomousExec.MaxCommandsPerTurn = 25
		a.Name = "Bobby"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tok, _ := r.Token(alice.ID)

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}

	r2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r2.Get(bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Bobby" || got.Slug != "bob" || !got.AutonomousExec.Enabled || got.AutonomousExec.MaxCommandsPerTurn != 25 || !got.CreatedAt.Equal(bob.CreatedAt) {
		t.Fatalf("reopened agent = %+v", got)
	}
	if tok2, _ := r2.Token("alice"); tok2 != tok {
		t.Fatal("token not persisted")
	}
	if _, err := r2.Remove("Bobby"); err != nil {
		t.Fatal(err)
	}
	r3, _ := Open(path)
	if l := r3.List(); len(l) != 1 || l[0].ID != alice.ID {
		t.Fatalf("after remove: %+v", l)
	}
	if _, err := r3.Get(bob.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get removed: %v", err)
	}
}

func TestGetResolution(t *testing.T) {
	r := openTemp(t)
	bob, _ := r.Add("Bob")
	// An agent whose name is another's slug: the slug wins.
	other, _ := r.Add("bob-2x")
	if _, err := r.Update(other.ID, func(a *Agent) error { a.Name = "Carol"; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{bob.ID, "bob", "BOB", "Bob"} {
		got, err := r.Get(ref)
		if err != nil || got.ID != bob.ID {
			t.Errorf("Get(%q) = %+v, %v", ref, got, err)
		}
	}
	if got, _ := r.Get("carol"); got.ID != other.ID {
		t.Errorf("Get(carol) = %+v", got)
	}
	_, err := r.Get("nobody")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatalf("Get(nobody) = %v", err)
	}
}

func TestTokens(t *testing.T) {
	r := openTemp(t)
	bob, _ := r.Add("Bob")
	alice, _ := r.Add("Alice")
	tb, _ := r.Token(bob.ID)
	ta, _ := r.Token(alice.ID)
	if tb == ta {
		t.Fatal("two agents share a token")
	}
	if got, ok := r.ByToken(tb); !ok || got.ID != bob.ID {
		t.Fatalf("ByToken(bob) = %+v, %v", got, ok)
	}
	for _, bad := range []string{"", tb[:63], tb + "0", strings.ToUpper(tb), strings.Repeat("0", 64)} {
		if _, ok := r.ByToken(bad); ok {
			t.Errorf("ByToken(%q) matched", bad)
		}
	}
	nt, err := r.RegenerateToken("bob")
	if err != nil || nt == tb || !validToken(nt) {
		t.Fatalf("RegenerateToken = %q, %v", nt, err)
	}
	if _, ok := r.ByToken(tb); ok {
		t.Fatal("old token still accepted")
	}
	if got, ok := r.ByToken(nt); !ok || got.ID != bob.ID {
		t.Fatal("new token not accepted")
	}
	if _, err := r.RegenerateToken("nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("RegenerateToken(nobody) = %v", err)
	}
	r.Remove(bob.ID)
	if _, ok := r.ByToken(nt); ok {
		t.Fatal("removed agent's token still accepted")
	}
}

func TestSubscribe(t *testing.T) {
	r := openTemp(t)
	var n atomic.Int32
	cancel := r.Subscribe(func() {
		n.Add(1)
		r.List() // callbacks may use the registry
	})
	a, _ := r.Add("Bob")
	r.Update(a.ID, func(a *Agent) error { a.AutonomousExec.Enabled = true; return nil })
	r.Update(a.ID, func(a *Agent) error { return nil }) // no change, no notification
	r.Update(a.ID, func(a *Agent) error { a.AutonomousExec.MaxCommandsPerTurn = 0; return nil })
	if got := n.Load(); got != 2 {
		t.Fatalf("notifications = %d, want 2", got)
	}
	// A change by another process is announced on Reload.
	other, _ := Open(r.Path())
	other.Add("Alice")
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("notifications = %d, want 3", got)
	}
	if err := r.Reload(); err != nil || n.Load() != 3 {
		t.Fatalf("Reload without change notified: %d, %v", n.Load(), err)
	}
	cancel()
	r.Remove(a.ID)
	if got := n.Load(); got != 3 {
		t.Fatalf("notified after cancel: %d", got)
	}
}

func TestTwoWritersKeepEachOthersChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	// Two Registries on one file stand in for the CLI and the app: they
	// share nothing but the file and its lock.
	cli, _ := Open(path)
	app, _ := Open(path)
	if _, err := cli.Add("Bob"); err != nil {
		t.Fatal(err)
	}
	// app's memory is stale, but its modification re-reads first.
	if _, err := app.Add("Alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Add("bob"); err == nil {
		t.Fatal("app didn't see cli's Bob")
	}
	if got := len(app.List()); got != 2 {
		t.Fatalf("app sees %d agents, want 2", got)
	}
	if err := cli.Reload(); err != nil || len(cli.List()) != 2 {
		t.Fatalf("cli sees %d agents after Reload (%v)", len(cli.List()), err)
	}
}

func TestConcurrentUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	regs := make([]*Registry, 3)
	for i := range regs {
		var err error
		if regs[i], err = Open(path); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	const perWorker = 5
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := regs[w%len(regs)]
			for i := range perWorker {
				a, err := r.Add(fmt.Sprintf("worker %d agent %d", w, i))
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := r.Update(a.ID, func(a *Agent) error { a.AutonomousExec.MaxCommandsPerTurn++; return nil }); err != nil {
					t.Error(err)
				}
				tok, _ := r.Token(a.ID)
				if got, ok := r.ByToken(tok); !ok || got.ID != a.ID {
					t.Errorf("ByToken for %s failed", a.Slug)
				}
				r.List()
			}
		}()
	}
	wg.Wait()
	final, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	list := final.List()
	if len(list) != 6*perWorker {
		t.Fatalf("%d agents on disk, want %d: writes were lost", len(list), 6*perWorker)
	}
	for _, a := range list {
		if a.AutonomousExec.MaxCommandsPerTurn != 11 {
			t.Errorf("%s: maxCommandsPerTurn = %d, want 11", a.Slug, a.AutonomousExec.MaxCommandsPerTurn)
		}
	}
}

func TestOpenRejectsBadFiles(t *testing.T) {
	good := `{"id":"1","name":"Bob","slug":"bob","autonomousExec":{"maxCommandsPerTurn":10},"createdAt":"2026-01-01T00:00:00Z","token":"` + strings.Repeat("ab", 32) + `"}`
	tests := []struct{ name, data, want string }{
		{"garbage", "{", "is damaged: line 1: it ends in the middle"},
		{"newer", `{"version":2,"agents":[]}`, "newer than this program"},
		{"bad slug", `{"version":1,"agents":[` + strings.Replace(good, `"slug":"bob"`, `"slug":"../etc"`, 1) + `]}`, "slug"},
		{"dup id", `{"version":1,"agents":[` + good + `,` + strings.Replace(good, `"bob"`, `"bob2"`, 1) + `]}`, "duplicate id"},
		{"bad token", `{"version":1,"agents":[` + strings.Replace(good, strings.Repeat("ab", 32), "x", 1) + `]}`, "token"},
		{"bad limit", `{"version":1,"agents":[` + strings.Replace(good, `"maxCommandsPerTurn":10`, `"maxCommandsPerTurn":1000`, 1) + `]}`, "maxCommandsPerTurn: 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), FileName)
			os.WriteFile(p, []byte(tt.data), 0o600)
			_, err := Open(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want error containing %q", err, tt.want)
			}
		})
	}
	p := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(p, []byte(`{"version":1,"agents":[`+good+`]}`), 0o600)
	if _, err := Open(p); err != nil {
		t.Fatalf("valid file: %v", err)
	}
}

// TestNetworkMigration: agents.json written by earlier versions stored
// network as a boolean; it reads as outbound/none and is rewritten as a
// string by the next change. A missing setting fails closed.
func TestNetworkMigration(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	tok := strings.Repeat("ab", tokenBytes)
	old := `{"version":1,"agents":[
 {"id":"a1","name":"On","slug":"on","autonomousExec":{"maxCommandsPerTurn":10,"network":true},"token":"` + tok + `"},
 {"id":"a2","name":"Off","slug":"off","autonomousExec":{"maxCommandsPerTurn":10,"network":false},"token":"` + tok + `"},
 {"id":"a3","name":"Unset","slug":"unset","autonomousExec":{"maxCommandsPerTurn":10},"token":"` + tok + `"}]}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]NetworkSetting{"on": "outbound", "off": "none", "unset": "none"} {
		a, err := r.Get(ref)
		if err != nil || a.AutonomousExec.Network != want {
			t.Errorf("%s: network %q (%v), want %q", ref, a.AutonomousExec.Network, err, want)
		}
	}
	if _, err := r.Update("on", func(a *Agent) error { return a.AutonomousExec.SetNetwork(" B.example.com,a.example.com ") }); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"network": true`) || strings.Contains(string(b), `"network": false`) ||
		!strings.Contains(string(b), `"network": "a.example.com,b.example.com"`) {
		t.Fatalf("rewritten file keeps the old form or lacks the canonical list:\n%s", b)
	}
	_, err = r.Update("off", func(a *Agent) error { a.AutonomousExec.Network = "*.*.example.com"; return nil })
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "network" || !strings.Contains(err.Error(), "want none, outbound") {
		t.Fatalf("bad network setting: %v, want a ValidationError naming network and the fix", err)
	}
}

func TestFindRefusesAmbiguousRefs(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	bot, err := r.Add("My Bot")
	if err != nil {
		t.Fatal(err)
	}
	// A name that folds to another's slug is refused now; a file from
	// before that rule can still have one.
	if _, err := r.Add("my-bot"); err == nil || !strings.Contains(err.Error(), `too like agent "My Bot" (slug my-bot)`) {
		t.Fatalf("a name folding to my-bot: %v", err)
	}
	other, err := r.Add("Other")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(r.Path())
	os.WriteFile(r.Path(), []byte(strings.Replace(strings.Replace(string(b), `"Other"`, `"my-bot"`, 1), `"other"`, `"my-bot-2"`, 1)), 0o600)
	if r, err = Open(r.Path()); err != nil {
		t.Fatal(err)
	}
	if other, err = r.Get(other.ID); err != nil || other.Slug != "my-bot-2" {
		t.Fatalf("edited file: %v %v", other, err)
	}
	if bot.Slug != "my-bot" || other.Slug != "my-bot-2" {
		t.Fatalf("slugs %s %s", bot.Slug, other.Slug)
	}
	for _, ref := range []string{"my-bot"} {
		_, err := r.Get(ref)
		var amb *AmbiguousError
		if !errors.As(err, &amb) || !errors.Is(err, ErrAmbiguous) || len(amb.Candidates) != 2 ||
			!strings.Contains(err.Error(), bot.ID) || !strings.Contains(err.Error(), other.ID) {
			t.Errorf("Get(%q) = %v, want an ambiguity listing both", ref, err)
		}
		if _, err := r.Remove(ref); !errors.Is(err, ErrAmbiguous) {
			t.Errorf("Remove(%q) = %v, want ambiguous", ref, err)
		}
	}
	for ref, want := range map[string]string{bot.ID: bot.ID, other.ID: other.ID, "My Bot": bot.ID, "my-bot-2": other.ID} {
		if a, err := r.Get(ref); err != nil || a.ID != want {
			t.Errorf("Get(%q) = %v %v, want %s", ref, a.ID, err, want)
		}
	}
	if a, err := r.GetSlug("my-bot"); err != nil || a.ID != bot.ID {
		t.Errorf("GetSlug(my-bot) = %v %v", a, err)
	}
	if len(r.List()) != 2 {
		t.Errorf("an ambiguous remove removed something: %v", r.List())
	}
}

// backgroundKeepsAwake: on for a new agent and for one stored before the
// setting existed; set by `agent set` spellings, kept across a reopen; a
// value that isn't a boolean is refused naming the key and what it wants.
func TestBackgroundKeepsAwakeSetting(t *testing.T) {
	r := openTemp(t)
	a, err := r.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	if !a.BackgroundKeepsAwake() {
		t.Fatal("a new agent's background processes don't keep the VM awake")
	}
	var old Agent
	if err := json.Unmarshal([]byte(`{"id":"x","name":"old","slug":"old","autonomousExec":{"backgroundProcesses":true}}`), &old); err != nil || !old.BackgroundKeepsAwake() {
		t.Fatalf("an agent stored before the setting: keeps awake %v, %v", old.BackgroundKeepsAwake(), err)
	}
	for _, tc := range []struct {
		key, value string
		want       bool
		err        string
	}{
		{"backgroundKeepsAwake", "false", false, ""},
		{"backgroundKeepsAwake", "on", true, ""},
		{"autonomousExec.backgroundKeepsAwake", "no", false, ""},
		{"backgroundKeepsAwake", "1", true, ""},
		{"backgroundKeepsAwake", "maybe", true, `backgroundKeepsAwake: "maybe", want true or false`},
		{"backgroundKeepsAwake", "", true, `backgroundKeepsAwake: "", want true or false`},
	} {
		x := a
		err := x.Set(tc.key, tc.value)
		if got := x.BackgroundKeepsAwake(); got != tc.want || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("set %s %q: keeps awake %v, %v; want %v, %q", tc.key, tc.value, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("set %s %q: %v is not ErrInvalid", tc.key, tc.value, err)
		}
	}
	if _, err := r.Update(a.ID, func(x *Agent) error { return x.Set("backgroundKeepsAwake", "false") }); err != nil {
		t.Fatal(err)
	}
	r2, err := Open(r.path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r2.Get("alice"); err != nil || got.BackgroundKeepsAwake() {
		t.Fatalf("after a reopen: keeps awake %v, %v", got.BackgroundKeepsAwake(), err)
	}
	var unknown *ValidationError
	if err := a.Set("backgroundKeepAwake", "false"); !errors.As(err, &unknown) || !strings.Contains(err.Error(), "backgroundKeepsAwake") {
		t.Errorf("a misspelt key: %v, want the keys listed", err)
	}
}
