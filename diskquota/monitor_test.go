package diskquota

import (
	"net"
	"sync"

	"context"
	"github.com/osaurus/osaurus-sandbox/agentproto"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
)

// Round blocks the agent over its quota, and every agent under the floor,
// with messages naming the limit and the fix; the usage file is written.
func TestMonitorRound(t *testing.T) {
	dir, reg := aliceAndBob(t, 0.01, 0)
	ws := filepath.Join(dir, "workspace")
	write(t, filepath.Join(ws, "agents", "alice", "big"), 12e6)
	write(t, filepath.Join(ws, "agents", "bob", "small"), 1e6)
	free := int64(100e9)
	tr := NewTracker(filepath.Join(ws, "agents"), ws)
	defer tr.Close()
	m := &Monitor{Tracker: tr, Registry: reg, UsageFile: filepath.Join(dir, "usage.json"),
		Free: func() (int64, error) { return free, nil }, Floor: func() int64 { return 2e9 }}

	r := m.Round(context.Background())
	if len(r.Blocked) != 1 || !strings.Contains(r.Blocked["alice"], "diskGB 0.01") || !strings.Contains(r.Blocked["alice"], "agent set alice diskGB") {
		t.Fatalf("blocked = %v", r.Blocked)
	}
	if r.Agents["alice"] < 12e6 || r.Agents["bob"] < 1e6 || r.Agents["bob"] > 2e6 {
		t.Fatalf("usage = %v", r.Agents)
	}
	if got, err := ReadReport(m.UsageFile); err != nil || got.Agents["alice"] != r.Agents["alice"] {
		t.Fatalf("usage file: %+v %v", got, err)
	}

	free = 1e9
	r = m.Round(context.Background())
	if len(r.Blocked) != 2 || !strings.Contains(r.Blocked["bob"], "hostFreeFloorGB") {
		t.Fatalf("under the floor: blocked = %v", r.Blocked)
	}
}

// fakeGuest answers usage with fixed temporary-file use and records the
// limits the monitor sends.
type fakeGuest struct {
	mu     sync.Mutex
	tmp    map[string]int64
	limits map[string]agentproto.UserLimitRequest
}

func (f *fakeGuest) client(t *testing.T) *agentproto.Client {
	t.Helper()
	m := agentproto.NewMux()
	m.Handle(agentproto.OpHello, agentproto.Unary(func(context.Context, *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
		return &agentproto.HelloResponse{Major: agentproto.VersionMajor, Minor: agentproto.VersionMinor}, nil
	}))
	m.Handle(agentproto.OpUsage, agentproto.Unary(func(_ context.Context, req *agentproto.UsageRequest) (*agentproto.UsageResponse, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		resp := &agentproto.UsageResponse{}
		for _, u := range req.Users {
			resp.Users = append(resp.Users, agentproto.UserUsage{User: u, TmpBytes: f.tmp[u]})
		}
		return resp, nil
	}))
	m.Handle(agentproto.OpUserLimit, agentproto.Unary(func(_ context.Context, req *agentproto.UserLimitRequest) (*agentproto.Empty, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.limits[req.Name] = *req
		return &agentproto.Empty{}, nil
	}))
	a, b := net.Pipe()
	srv, err := agentproto.NewServerPeer(b)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), m)
	cli, err := agentproto.NewClientPeer(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(nil); srv.Close(nil) })
	c, err := agentproto.Handshake(context.Background(), cli)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// One quota holds an agent's files and its temporary files in the guest
// together: the temporary area is capped at what the files leave, and
// the sum over the quota blocks the agent with a message naming both.
func TestMonitorCountsTemporaryFiles(t *testing.T) {
	dir, reg := aliceAndBob(t, 0.02, 0.02)
	ws := filepath.Join(dir, "workspace")
	write(t, filepath.Join(ws, "agents", "alice", "home-file"), 8e6)
	write(t, filepath.Join(ws, "agents", "bob", "home-file"), 8e6)
	fg := &fakeGuest{tmp: map[string]int64{"agent-alice": 13e6, "agent-bob": 2e6}, limits: map[string]agentproto.UserLimitRequest{}}
	g := fg.client(t)
	tr := NewTracker(filepath.Join(ws, "agents"), ws)
	defer tr.Close()
	m := &Monitor{Tracker: tr, Registry: reg, Guest: func() (*agentproto.Client, error) { return g, nil }}

	r := m.Round(context.Background())
	// alice: 8 MB of files and 13 MB in /tmp, over her 20 MB.
	if !strings.Contains(r.Blocked["alice"], "temporary files") || r.Agents["alice"] < 21e6 || r.Tmp["alice"] != 13e6 {
		t.Fatalf("alice over her quota with /tmp: blocked %q, usage %d, tmp %d", r.Blocked["alice"], r.Agents["alice"], r.Tmp["alice"])
	}
	if _, blocked := r.Blocked["bob"]; blocked || r.Agents["bob"] < 10e6 {
		t.Fatalf("bob under his quota: blocked %v, usage %d", r.Blocked, r.Agents["bob"])
	}
	fg.mu.Lock()
	for _, u := range []string{"agent-alice", "agent-bob"} {
		l := fg.limits[u]
		// The files take 8 MB and a few kB of directories: the area may
		// hold the rest of the 20 MB but the headroom.
		if want := int64(12e6 - TmpHeadroom); l.TmpMaxBytes <= want-1e6 || l.TmpMaxBytes > want {
			t.Errorf("%s's temporary files capped at %d bytes, want the %d its files leave", u, l.TmpMaxBytes, want)
		}
	}
	if !fg.limits["agent-alice"].Blocked || fg.limits["agent-bob"].Blocked {
		t.Errorf("limits sent: %+v", fg.limits)
	}
	fg.tmp["agent-alice"] = 0 // alice empties /tmp
	fg.mu.Unlock()

	r = m.Round(context.Background())
	fg.mu.Lock()
	defer fg.mu.Unlock()
	if len(r.Blocked) != 0 || fg.limits["agent-alice"].Blocked {
		t.Fatalf("alice back under her quota is still blocked: %v %+v", r.Blocked, fg.limits["agent-alice"])
	}
}

// A new guest session gets the caps and blocks from Attach, before the
// monitor's Guest hands it out (during a boot it still answers "none"),
// and the next round keeps them rather than starting over.
func TestMonitorAttachPrimesANewSession(t *testing.T) {
	dir, reg := aliceAndBob(t, 0.02, 0.02)
	ws := filepath.Join(dir, "workspace")
	write(t, filepath.Join(ws, "agents", "alice", "home-file"), 15e6) // 5 MB left
	write(t, filepath.Join(ws, "agents", "bob", "home-file"), 21e6)   // over
	fg := &fakeGuest{tmp: map[string]int64{}, limits: map[string]agentproto.UserLimitRequest{}}
	g := fg.client(t)
	tr := NewTracker(filepath.Join(ws, "agents"), ws)
	defer tr.Close()
	var running *agentproto.Client // what Guest returns: nothing until the boot is done
	m := &Monitor{Tracker: tr, Registry: reg, Guest: func() (*agentproto.Client, error) {
		if running == nil {
			return nil, agentproto.ErrUnavailable
		}
		return running, nil
	}}
	m.Round(context.Background()) // the VM is still booting: nothing to send
	if len(fg.limits) != 0 {
		t.Fatalf("limits sent without a guest: %v", fg.limits)
	}

	m.Attach(context.Background(), g)
	fg.mu.Lock()
	alice, bob := fg.limits["agent-alice"], fg.limits["agent-bob"]
	fg.mu.Unlock()
	if alice.Blocked || alice.TmpMaxBytes <= 0 || alice.TmpMaxBytes > 5e6 {
		t.Fatalf("alice after Attach: %+v, want unblocked with /tmp capped at what her files leave (5 MB)", alice)
	}
	if !bob.Blocked || !strings.Contains(bob.Reason, "diskGB") {
		t.Fatalf("bob after Attach: %+v, want blocked over his quota", bob)
	}

	// The session is handed out; the next round has nothing new to say.
	running = g
	fg.mu.Lock()
	clear(fg.limits)
	fg.mu.Unlock()
	m.Round(context.Background())
	fg.mu.Lock()
	defer fg.mu.Unlock()
	if len(fg.limits) != 0 {
		t.Fatalf("the round after Attach sent again: %v", fg.limits)
	}
}

// aliceAndBob is a registry of the agents alice and bob with the given
// diskGB (0: the default), in a fresh folder whose "workspace" holds their
// homes.
func aliceAndBob(t *testing.T, aliceGB, bobGB float64) (string, *agents.Registry) {
	t.Helper()
	dir := t.TempDir()
	reg, err := agents.Open(filepath.Join(dir, "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		name string
		gb   float64
	}{{"alice", aliceGB}, {"bob", bobGB}} {
		if _, err := reg.Add(a.name); err != nil {
			t.Fatal(err)
		}
		if a.gb == 0 {
			continue
		}
		if _, err := reg.Update(a.name, func(ag *agents.Agent) error { ag.DiskGB = a.gb; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return dir, reg
}
