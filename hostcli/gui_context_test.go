package hostcli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// The window opens on the context --context, OSAURUS_SANDBOX_CONTEXT or
// the current one names, as every command does; an unknown one fails
// before any window.
func TestWindowTakesTheContext(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	t.Setenv(remotes.Env, "")
	st := (&cli{paths: config.Paths{Root: home}}).contextStore()
	if err := st.Add(remotes.Context{Name: "box", URL: "ssh://me@box"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	own := Owner{GUI: func(_ context.Context, _ config.Paths, name string, _ io.Writer) error {
		got = append(got, name)
		return nil
	}}
	open := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := Main(args, strings.NewReader(""), &out, &errOut, own)
		return code, errOut.String()
	}
	open()
	open("--context", "box")
	t.Setenv(remotes.Env, "box")
	open()
	open("--context", "local")
	t.Setenv(remotes.Env, "")
	if err := st.Use("box"); err != nil {
		t.Fatal(err)
	}
	open()
	if want := []string{"local", "box", "box", "local", "box"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the window opened on %v, want %v", got, want)
	}
	if code, errOut := open("--context", "nowhere"); code != ExitError || !strings.Contains(errOut, "nowhere") || len(got) != 5 {
		t.Errorf("an unknown context: %d %q (%d windows)", code, errOut, len(got))
	}
}
