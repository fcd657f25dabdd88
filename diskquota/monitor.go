package diskquota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// Interval is how often the Monitor measures and enforces.
const Interval = time.Second

// TmpHeadroom is what an agent's temporary files can't take of what its
// files on the host leave of its quota: the small writes every command
// makes to the home (the first command's dotfiles, shell history) would
// otherwise push an agent whose /tmp is full over its quota at once.
const TmpHeadroom = 1 << 20

// WriteEvery is the longest the UsageFile goes unwritten while a Monitor
// runs, so a reader can tell a live measure from a stale one.
const WriteEvery = 5 * time.Second

// Monitor enforces the quotas: every Interval it refreshes the Tracker,
// and blocks in the guest (processes killed, exec and writes refused) each
// agent over its diskGB quota, and every agent while the host's free space
// is under the floor. It unblocks them when they are back under.
//
// One quota holds an agent's files on the host and its private temporary
// files in the guest (a tmpfs) together: the guest reports the latter
// with the agents' usage, and the Monitor caps each agent's tmpfs at what
// its quota leaves after its files on the host, so the kernel stops a
// write to /tmp at the quota (ENOSPC) and a write to the home over it is
// blocked within a round or two, as before.
type Monitor struct {
	Tracker  *Tracker
	Registry *agents.Registry
	// Guest returns the running VM's agent, or an error when none runs.
	Guest func() (*agentproto.Client, error)
	// Free is the host's free space for the workspace, in bytes.
	Free func() (int64, error)
	// Floor is the free-space floor in bytes (read on every round, so a
	// changed setting applies at once).
	Floor func() int64
	// UsageFile, when set, receives the latest per-agent usage (JSON),
	// for `agent list` in other processes.
	UsageFile string
	Logf      func(string, ...any)

	mu      sync.Mutex // one round at a time: Run's and Attach's
	guest   *agentproto.Client
	applied map[string]string // user → reason the guest has
	caps    map[string]int64  // user → temporary-area cap the guest has
	written Report
}

// Report is one round's measure, as written to UsageFile.
type Report struct {
	Time     time.Time         `json:"time"`
	HostFree int64             `json:"hostFreeBytes"`
	Floor    int64             `json:"hostFreeFloorBytes"`
	Agents   map[string]int64  `json:"agents"`            // slug → bytes, temporary files included
	Tmp      map[string]int64  `json:"tmp,omitempty"`     // slug → bytes of temporary files in the guest
	Blocked  map[string]string `json:"blocked,omitempty"` // slug → reason

	caps map[string]int64 // user → the cap on its temporary area
}

// Run enforces until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		m.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Round measures once and brings the guest's blocks in line.
func (m *Monitor) Round(ctx context.Context) Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.round(ctx, m.session())
}

// Attach brings a new guest session in line at once, before anything
// else uses it: a restarted VM forgot every block and cap, and until the
// next round an agent's first command would get a temporary area as big
// as its whole quota, whatever its home already holds (and an agent over
// its quota would run). Call it before the session is handed out.
func (m *Monitor) Attach(ctx context.Context, g *agentproto.Client) Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.guest, m.applied, m.caps = g, map[string]string{}, map[string]int64{}
	return m.round(ctx, g)
}

func (m *Monitor) round(ctx context.Context, g *agentproto.Client) Report {
	// Settings changed by the CLI or the window went through the owner's
	// registry, this one: they apply on this round with no re-read.
	m.Tracker.Refresh()
	r := Report{Time: time.Now().UTC().Truncate(time.Second), Agents: map[string]int64{}, Tmp: map[string]int64{},
		Blocked: map[string]string{}, caps: map[string]int64{}}
	list := m.Registry.List()
	tmp := m.tmpUsage(ctx, g, list)
	free, ferr := int64(-1), error(nil)
	if m.Free != nil {
		free, ferr = m.Free()
	}
	if m.Floor != nil {
		r.Floor = m.Floor()
	}
	r.HostFree = free
	underFloor := ferr == nil && free >= 0 && free < r.Floor
	for _, a := range list {
		files := m.Tracker.Usage(a.Slug, a.UID)
		used := files + tmp[a.User()]
		r.Agents[a.Slug] = used
		if t := tmp[a.User()]; t > 0 {
			r.Tmp[a.Slug] = t
		}
		// Whatever the files leave but the headroom; at least a byte,
		// as 0 means no cap.
		r.caps[a.User()] = max(a.DiskQuota()-files-TmpHeadroom, 1)
		switch {
		case used > a.DiskQuota():
			var inTmp string
			if t := tmp[a.User()]; t > 0 {
				inTmp = fmt.Sprintf(" (%s of it temporary files in /tmp, /var/tmp and /dev/shm)", human(t))
			}
			r.Blocked[a.Slug] = fmt.Sprintf("agent %s uses %s%s of its %s quota (diskGB %g). "+
				"Its commands were stopped and new commands and writes are refused until it is back under. "+
				"Fix: delete files (sandbox_delete still works, or delete them on the host), or raise it with `osaurus-sandbox agent set %s diskGB N`",
				a.Name, human(used), inTmp, human(a.DiskQuota()), float64(a.DiskQuota())/1e9, a.Slug)
		case underFloor:
			r.Blocked[a.Slug] = fmt.Sprintf("the host's disk is almost full: %s free, under the %s floor (hostFreeFloorGB). "+
				"Every agent's commands were stopped and writes are refused until space is freed. "+
				"Fix: free space on the host, or lower it with `osaurus-sandbox config set hostFreeFloorGB N`",
				human(free), human(r.Floor))
		}
	}
	m.apply(ctx, g, r)
	if m.UsageFile != "" && m.changed(r) {
		if b, err := json.MarshalIndent(r, "", "  "); err == nil {
			if err := atomicfile.WriteFile(m.UsageFile, append(b, '\n'), 0o644); err != nil {
				m.logf("disk quota: %v", err)
			} else {
				m.written = r
			}
		}
	}
	return r
}

// changed says whether r is worth writing: a block changed, or a usage
// moved by more than 1 MB, or WriteEvery passed.
func (m *Monitor) changed(r Report) bool {
	last := m.written
	if !maps.Equal(r.Blocked, last.Blocked) || len(r.Agents) != len(last.Agents) || r.Time.Sub(last.Time) >= WriteEvery {
		return true
	}
	for k, v := range r.Agents {
		if d := v - last.Agents[k]; d > 1<<20 || d < -(1<<20) {
			return true
		}
	}
	return false
}

// session is the guest's session, nil when none runs; a new session
// gets every block and cap again (a restarted VM forgot them).
func (m *Monitor) session() *agentproto.Client {
	if m.Guest == nil {
		return nil
	}
	g, err := m.Guest()
	if err != nil {
		m.guest, m.applied, m.caps = nil, nil, nil
		return nil
	}
	if g != m.guest {
		m.guest, m.applied, m.caps = g, map[string]string{}, map[string]int64{}
	}
	return g
}

// tmpUsage asks the guest what the agents' temporary files take (user →
// bytes); nothing without a guest, or from one that does not say.
func (m *Monitor) tmpUsage(ctx context.Context, g *agentproto.Client, list []agents.Agent) map[string]int64 {
	out := map[string]int64{}
	if g == nil || len(list) == 0 {
		return out
	}
	users := make([]string, 0, len(list))
	for _, a := range list {
		users = append(users, a.User())
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := g.Usage(cctx, agentproto.UsageRequest{Users: users})
	if err != nil {
		if !errors.Is(err, agentproto.ErrUnsupported) {
			m.logf("disk quota: temporary files: %v", err)
		}
		return out
	}
	for _, u := range resp.Users {
		if u.TmpBytes > 0 {
			out[u.User] = u.TmpBytes
		}
	}
	return out
}

// apply sends the blocks and temporary-area caps that changed.
func (m *Monitor) apply(ctx context.Context, g *agentproto.Client, r Report) {
	if g == nil {
		return
	}
	want := map[string]string{}
	for slug, reason := range r.Blocked {
		want["agent-"+slug] = reason
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// One request says all the host wants of a user: block or not, and
	// the cap.
	send := func(user string) error {
		reason, blocked := want[user]
		return g.UserLimit(cctx, agentproto.UserLimitRequest{Name: user, Blocked: blocked, Reason: reason, TmpMaxBytes: r.caps[user]})
	}
	for user, reason := range want {
		if m.applied[user] == reason && m.caps[user] == r.caps[user] {
			continue
		}
		err := send(user)
		if errors.Is(err, agentproto.ErrNoSuchUser) {
			continue // no processes yet; retried next round
		}
		if err != nil {
			m.logf("disk quota: blocking %s: %v", user, err)
			continue
		}
		if m.applied[user] != reason {
			m.logf("disk quota: blocked %s: %s", user, reason)
		}
		m.applied[user], m.caps[user] = reason, r.caps[user]
	}
	for user := range m.applied {
		if _, still := want[user]; still {
			continue
		}
		if err := send(user); err != nil && !errors.Is(err, agentproto.ErrNoSuchUser) {
			m.logf("disk quota: unblocking %s: %v", user, err)
			continue
		}
		m.logf("disk quota: unblocked %s", user)
		delete(m.applied, user)
		m.caps[user] = r.caps[user]
	}
	// Caps of users neither blocked nor just unblocked. A user the guest
	// does not know yet gets its cap when it is made: it is kept by name.
	for user, c := range r.caps {
		if _, blocked := want[user]; blocked || m.caps[user] == c {
			continue
		}
		if err := send(user); err != nil {
			m.logf("disk quota: capping %s's temporary files: %v", user, err)
			continue
		}
		m.caps[user] = c
	}
}

func (m *Monitor) logf(f string, a ...any) {
	if m.Logf != nil {
		m.Logf(f, a...)
	}
}

// ReadReport reads a UsageFile.
func ReadReport(path string) (Report, error) {
	var r Report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Measure walks workspace once and returns each agent's usage, for when
// no Monitor runs.
func Measure(workspace, output string, list []agents.Agent) map[string]int64 {
	t := &Tracker{homes: filepath.Join(workspace, "agents"), roots: []string{workspace, output}}
	t.reset()
	t.Refresh()
	out := map[string]int64{}
	for _, a := range list {
		out[a.Slug] = t.Usage(a.Slug, a.UID)
	}
	return out
}

// Latest is each agent's usage by slug: a running Monitor's report at
// usageFile while it is fresh, else one walk of the folders (Measure).
func Latest(usageFile, workspace, output string, list []agents.Agent) map[string]int64 {
	if r, err := ReadReport(usageFile); err == nil && time.Since(r.Time) < 3*WriteEvery {
		return r.Agents
	}
	return Measure(workspace, output, list)
}

// human formats bytes in decimal units, as diskGB is.
func human(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// Human is human for callers printing usage.
func Human(n int64) string { return human(n) }
