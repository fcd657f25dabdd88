//go:build linux

package files

import (
	"testing"

	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/internal/agenttest"
)

const (
	aliceUID = agenttest.AliceUID
	bobUID   = agenttest.BobUID
)

var (
	mustMkdir = agenttest.MustMkdir
	writeFile = agenttest.WriteFile
	ownerOf   = agenttest.OwnerOf
)

type testEnv struct {
	svc  *Ops
	base string // world-traversable temp dir
	db   account.UserDB
}

func (e *testEnv) home(user string) string { return (&agenttest.Accounts{Base: e.base}).Home(user) }

// newTestEnv builds Ops whose account files live in a temp dir and know
// root, alice and bob (both members of group "devs"). It needs root.
func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	acc := agenttest.NewAccounts(t, "files")
	return &testEnv{svc: New(Config{Users: acc.DB}), base: acc.Base, db: acc.DB}
}
