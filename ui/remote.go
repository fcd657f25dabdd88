package ui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// The window of a remote context (docs/remote.md): the sandbox of another
// machine, driven through its owner over the user's ssh (dial-stdio). What
// goes through api.Controller works as it does here, including the tabs
// that read a data folder's files locally (console log, settings,
// plugins, projects, changes, ports, tasks), which ask the far side's
// owner (Far). This machine's files never pass for the far side's.

// RemoteBackend is the Backend of a remote context: a Controlled over the
// far side's owner without the methods that read a local data folder
// (Paths, Plugins), which is how the tabs built on them know to stay out.
type RemoteBackend struct {
	c  *Controlled
	rc remotes.Context
	// here is this machine's data folder: its contexts.json names rc (an
	// MCP client's entry names it too), its config folder keeps the
	// record of the folders uploaded (Links), and its secret store holds
	// rc's secrets when the far side's secretStore is "client".
	here config.Paths
	// fwd are the previews opened here from the Ports tab.
	fwd *remotes.Forwards

	mu  sync.Mutex
	rev string // the revision of the far sandbox.json Settings last read
}

// NewRemoteBackend is the Backend over ctl, the owner rc reaches, from
// this machine's data folder here (rc's entry in its contexts.json).
// Close it when done (ctl stays open).
func NewRemoteBackend(ctx context.Context, ctl api.Controller, rc remotes.Context, here config.Paths) (*RemoteBackend, error) {
	c, err := NewBackend(ctx, ctl, config.Paths{}) // no far folder here: never read
	if err != nil {
		return nil, err
	}
	return &RemoteBackend{c: c, rc: rc, here: here, fwd: rc.Forwards()}, nil
}

// Forward gives a URL port on this machine's loopback for the far side's
// preview on its 127.0.0.1:farPort, forwarded over the context's ssh
// (remotes.Forwards, as an `mcp --agent` relay does) until the backend
// closes. The same far port gets the same local one.
func (r *RemoteBackend) Forward(farPort int) (int, error) { return r.fwd.Open(farPort) }

// Links is this machine's record of the folders uploaded to the far side
// as projects (remote-projects.json, as the command line keeps it).
func (r *RemoteBackend) Links() remotes.Links {
	return remotes.Links{Path: remotes.LinksPath(r.here.ConfigDir())}
}

// Here is this machine's data folder, the one whose contexts.json names
// the context: never read for the far side's agents or settings.
func (r *RemoteBackend) Here() config.Paths { return r.here }

// Remote is the context the backend drives.
func (r *RemoteBackend) Remote() remotes.Context { return r.rc }

// Far is the far side's owner: the tabs whose data are files there (the
// tasks, the plugin library, the console log, the agents' changes) read
// and change them through it.
func (r *RemoteBackend) Far() api.Controller { return r.c.ctl }

// farOf is the far side's owner of a remote context's backend, nil for
// this machine's sandbox.
func farOf(b Backend) api.Controller {
	if r, ok := b.(interface{ Far() api.Controller }); ok {
		return r.Far()
	}
	return nil
}

// farPoll is how often a tab of a remote context asks the far side's
// owner for what it shows: its files can't be watched from here. A
// variable for tests.
var farPoll = 3 * time.Second

// farCall bounds one question to the far side's owner: a tab must not
// wait forever on a link that hangs (watchLink notices it is gone).
const farCall = 30 * time.Second

// Close stops following the status and ends the previews' forwards.
func (r *RemoteBackend) Close() {
	r.fwd.CloseAll()
	r.c.Close()
}

// Ping asks the far side's owner for its status: an error means the link
// is gone (ssh can't reach it again).
func (r *RemoteBackend) Ping(ctx context.Context) error {
	_, err := r.c.ctl.Status(ctx)
	return err
}

func (r *RemoteBackend) Status() control.Status                   { return r.c.Status() }
func (r *RemoteBackend) Subscribe(fn func(control.Status)) func() { return r.c.Subscribe(fn) }
func (r *RemoteBackend) Provision(ctx context.Context) error      { return r.c.Provision(ctx) }
func (r *RemoteBackend) Start(ctx context.Context) error          { return r.c.Start(ctx) }
func (r *RemoteBackend) Stop(ctx context.Context) error           { return r.c.Stop(ctx) }
func (r *RemoteBackend) Reset(ctx context.Context) error          { return r.c.Reset(ctx) }
func (r *RemoteBackend) Remove(ctx context.Context) error         { return r.c.Remove(ctx) }
func (r *RemoteBackend) Owner() string                            { return r.c.Owner() }
func (r *RemoteBackend) AgentOps() AgentOps                       { return r.c.AgentOps() }
func (r *RemoteBackend) Checkpoints() api.Checkpointer            { return r.c.Checkpoints() }
func (r *RemoteBackend) MCP() (url, problem string)               { return r.c.MCP() }
func (r *RemoteBackend) ConsoleLog() string                       { return "" }
func (r *RemoteBackend) DataDir() string                          { return r.rc.DataDir }
func (r *RemoteBackend) ImagePlan(ctx context.Context, manifestURL string) (control.ImagePlan, error) {
	return r.c.ImagePlan(ctx, manifestURL)
}
func (r *RemoteBackend) Diagnostics(ctx context.Context, onResult func(diagnostics.Result)) ([]diagnostics.Result, error) {
	return r.c.Diagnostics(ctx, onResult)
}
func (r *RemoteBackend) Usage(ctx context.Context, req agentproto.UsageRequest) (agentproto.UsageResponse, error) {
	return r.c.Usage(ctx, req)
}
func (r *RemoteBackend) NetLog(ctx context.Context, req agentproto.NetLogRequest) (agentproto.NetLogResponse, error) {
	return r.c.NetLog(ctx, req)
}

// ReadSettings is the far side's sandbox.json as its owner reads it,
// with the Revision a WriteSettings is based on.
func (r *RemoteBackend) ReadSettings(ctx context.Context) (api.SettingsFile, error) {
	f, err := r.c.ctl.Settings(ctx)
	if err != nil {
		return f, r.farSettingsError(err, "read")
	}
	r.mu.Lock()
	r.rev = f.Revision
	r.mu.Unlock()
	return f, nil
}

// WriteSettings has the far side's owner write cfg into its sandbox.json
// when the file is still at ifRevision (the one read); when it changed
// there since, nothing is written and the error says so
// (errFarSettingsChanged).
func (r *RemoteBackend) WriteSettings(ctx context.Context, cfg config.Sandbox, ifRevision string) (api.SettingsFile, error) {
	f, err := r.c.ctl.SaveSettings(ctx, api.SettingsSave{Settings: cfg, IfRevision: ifRevision})
	// config.ErrChanged arrives as its class: nothing else of this op is
	// busy.
	if errors.Is(err, agentproto.ErrBusy) || errors.Is(err, config.ErrChanged) {
		return f, fmt.Errorf("%w: the settings of %s changed on the far side since you opened them (another window, or `config set` there): "+
			"press Reload to see them as they are now, or reopen the window, then make your change again", errFarSettingsChanged, r.rc.Name)
	}
	if err != nil {
		return f, r.farSettingsError(err, "save")
	}
	r.mu.Lock()
	r.rev = f.Revision
	r.mu.Unlock()
	return f, nil
}

// errFarSettingsChanged: a save of a remote context's settings was based
// on a revision the far side's sandbox.json is no longer at.
var errFarSettingsChanged = errors.New("not saved")

func (r *RemoteBackend) farSettingsError(err error, verb string) error {
	if errors.Is(err, agentproto.ErrUnsupported) {
		return fmt.Errorf("the osaurus-sandbox of %s can't %s its settings for this one (%w): install this version there with `osaurus-sandbox context install %s`, or run `%s`",
			r.rc.Name, verb, err, r.rc.Name, FarCommand(r.rc, "config", "get"))
	}
	return fmt.Errorf("the settings of %s can't be %s: %w", r.rc.Name, map[string]string{"read": "read", "save": "saved"}[verb], err)
}

// Settings are the far side's sandbox.json, asked of its owner (bounded
// by farCall); SaveSettings writes a change to them based on the
// revision the last read saw. They ask over the link: call them off the
// UI goroutine (the Container tab uses ReadSettings and WriteSettings,
// keeping the revision of what its form shows).
func (r *RemoteBackend) Settings() (config.Sandbox, error) {
	ctx, cancel := context.WithTimeout(context.Background(), farCall)
	defer cancel()
	f, err := r.ReadSettings(ctx)
	return f.Settings, err
}

func (r *RemoteBackend) SaveSettings(cfg config.Sandbox) error {
	ctx, cancel := context.WithTimeout(context.Background(), farCall)
	defer cancel()
	r.mu.Lock()
	rev := r.rev
	r.mu.Unlock()
	_, err := r.WriteSettings(ctx, cfg, rev)
	return err
}

// remoteOf is the context b drives, ok false for this machine's sandbox.
func remoteOf(b Backend) (remotes.Context, bool) {
	if r, ok := b.(interface{ Remote() remotes.Context }); ok {
		return r.Remote(), true
	}
	return remotes.Context{}, false
}

// FarCommand is the command line that runs osaurus-sandbox args on the
// context's machine, as the user would type it here.
func FarCommand(rc remotes.Context, args ...string) string { return rc.FarCommand(args...) }

// ContextLabel names what the window drives: "box — ssh://me@box", or
// this machine's data folder.
func ContextLabel(b Backend) string {
	if rc, ok := remoteOf(b); ok {
		return rc.Name + " — " + rc.URL
	}
	return remotes.Local + " — this machine (" + b.DataDir() + ")"
}

// OpenRemote opens the session of a remote context: one connection (one
// ssh running dial-stdio) to the far side's owner, started there when
// none runs, as `--context NAME status` does. The agents are the far
// side's, asked over it (ListAgents). here is this machine's data
// folder, whose contexts.json has rc and whose store holds the context's
// secrets: the session offers them (a second connection,
// remotes.OfferSecrets) while it is open, and the Agents tab shows and
// sets them when the far owner keeps its secrets here (farSecrets).
func OpenRemote(ctx context.Context, rc remotes.Context, here config.Paths) (*Session, error) {
	cl, err := client.Via(ctx, rc.Dialer())
	if err != nil {
		return nil, fmt.Errorf("context %s (%s): %w", rc.Name, rc.URL, err)
	}
	b, err := NewRemoteBackend(ctx, cl, rc, here)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("context %s (%s): %w", rc.Name, rc.URL, err)
	}
	reg, err := agents.Mirror(func() ([]agents.Agent, error) {
		// Bounded: the Agents tab reloads on the UI's goroutine.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		l, err := cl.ListAgents(ctx)
		return l.Agents, err
	})
	if err != nil {
		b.Close()
		cl.Close()
		if errors.Is(err, agentproto.ErrUnsupported) {
			return nil, fmt.Errorf("context %s: the far side's osaurus-sandbox can't list its agents (%w): install this version there with `osaurus-sandbox context install %s`", rc.Name, err, rc.Name)
		}
		return nil, fmt.Errorf("context %s (%s): %w", rc.Name, rc.URL, err)
	}
	// While the window is open it is a front end connected from this
	// machine: a far owner that keeps its secrets here (secretStore
	// client) reads them through it, as through an `mcp --agent` relay.
	stopOffer := remotes.OfferSecrets(context.Background(), rc.Dialer(), secrets.ForDataDir(here).B, rc.Name)
	var once sync.Once
	return &Session{
		Backend: b, Registry: reg,
		Memory: cl, Events: cl,
		Secrets:    newFarSecrets(rc, cl, here),
		AgentLog:   func(slug string) (string, error) { return cl.AgentLog(context.Background(), slug) },
		AgentUsage: func(ctx context.Context, a agents.Agent) (agents.Usage, error) { return UsageVia(ctx, cl, a) },
		Close: func() {
			once.Do(func() {
				stopOffer()
				b.Close()
				cl.Close()
			})
		},
	}, nil
}

// UsageVia is an agent's resource use in the running VM of ctl's owner,
// for the Agents tab. It is bounded: a listing must not hang on a busy VM.
func UsageVia(ctx context.Context, ctl api.Controller, a agents.Agent) (agents.Usage, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if st, err := ctl.Status(ctx); err != nil || st.State != control.Running {
		return agents.Usage{}, errors.New("the VM is not running")
	}
	resp, err := ctl.Usage(ctx, agentproto.UsageRequest{Users: []string{a.User()}})
	if err != nil {
		return agents.Usage{}, fmt.Errorf("the VM did not report usage: %v", err)
	}
	for _, u := range resp.Users {
		if u.User == a.User() {
			return agents.UsageFrom(u), nil
		}
	}
	return agents.Usage{}, nil // nothing run since the VM started
}
