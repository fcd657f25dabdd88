package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// fakeGuest is an agentproto.Service with an in-memory file system. It
// records every request so tests can check what a tool asked of the guest,
// and fails ops on demand.
type fakeGuest struct {
	mu    sync.Mutex
	info  agentproto.HelloResponse
	reqs  []fakeReq
	files map[string]string // path → content
	dirs  map[string]bool
	links map[string]string // path → target; Stat reports a symlink
	fail  map[string]error  // op → error to return
	// exec runs Exec and StartBackground requests; the default prints
	// nothing and exits 0.
	exec func(req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error)
	wait map[int]agentproto.ExitStatus
}

type fakeReq struct {
	op  string
	req any
}

func newFakeGuest() *fakeGuest {
	return &fakeGuest{
		info:  agentproto.HelloResponse{Major: agentproto.VersionMajor, Distro: "debian", PackageMgr: "apt"},
		files: map[string]string{},
		dirs:  map[string]bool{"/workspace": true, "/workspace/agents": true, "/workspace/shared": true, "/workspace/agents/bob": true},
		links: map[string]string{},
		fail:  map[string]error{},
		wait:  map[int]agentproto.ExitStatus{},
	}
}

// connect serves f over a pipe and returns a client that handshook.
func (f *fakeGuest) connect(t testing.TB) *agentproto.Client {
	t.Helper()
	host, guest := net.Pipe()
	sp, err := agentproto.NewServerPeer(guest)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sp.Serve(ctx, agentproto.ServiceMux(f)) }()
	cp, err := agentproto.NewClientPeer(host)
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentproto.Handshake(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close(nil); sp.Close(nil); cancel(); <-done })
	return c
}

func (f *fakeGuest) record(op string, req any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, fakeReq{op, req})
	return f.fail[op]
}

// ops lists the recorded ops, without the handshake.
func (f *fakeGuest) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reqs {
		if r.op != agentproto.OpHello {
			out = append(out, r.op)
		}
	}
	return out
}

// last returns the last request of op.
func (f *fakeGuest) last(t testing.TB, op string) any {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.reqs) - 1; i >= 0; i-- {
		if f.reqs[i].op == op {
			return f.reqs[i].req
		}
	}
	t.Fatalf("no %s request; requests: %v", op, f.reqs)
	return nil
}

func (f *fakeGuest) all(op string) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []any
	for _, r := range f.reqs {
		if r.op == op {
			out = append(out, r.req)
		}
	}
	return out
}

func (f *fakeGuest) reset() {
	f.mu.Lock()
	f.reqs = nil
	f.mu.Unlock()
}

func (f *fakeGuest) put(p, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[p] = content
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		f.dirs[d] = true
	}
}

func (f *fakeGuest) get(p string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.files[p]
	return s, ok
}

func notFound(p string) error {
	return fmt.Errorf("%w: %s: no such file or directory", agentproto.ErrNotFound, p)
}

func (f *fakeGuest) Hello(_ context.Context, req *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
	f.record(agentproto.OpHello, *req)
	info := f.info
	return &info, nil
}

func (f *fakeGuest) Exec(_ context.Context, req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
	if err := f.record(agentproto.OpExec, *req); err != nil {
		return agentproto.ExitStatus{}, err
	}
	if err := eio.Started(100); err != nil {
		return agentproto.ExitStatus{}, err
	}
	if f.exec == nil || (len(req.Argv) > 0 && req.Argv[0] == "chmod") { // chmod: the shared dir
		return agentproto.ExitStatus{Exited: true}, nil
	}
	return f.exec(req, eio)
}

func (f *fakeGuest) StartBackground(_ context.Context, req *agentproto.StartBackgroundRequest) (*agentproto.StartBackgroundResponse, error) {
	if err := f.record(agentproto.OpStartBg, *req); err != nil {
		return nil, err
	}
	log := "/workspace/agents/bob/.sandbox/logs/1700000000.log"
	f.put(log, "")
	return &agentproto.StartBackgroundResponse{Pid: 4242, LogPath: log}, nil
}

func (f *fakeGuest) Signal(_ context.Context, req *agentproto.SignalRequest) (*agentproto.Empty, error) {
	return &agentproto.Empty{}, f.record(agentproto.OpSignal, *req)
}

func (f *fakeGuest) Wait(_ context.Context, req *agentproto.WaitRequest) (*agentproto.ExitStatus, error) {
	if err := f.record(agentproto.OpWait, *req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.wait[req.Pid]
	if !ok {
		return nil, fmt.Errorf("%w: no background process %d started by the agent", agentproto.ErrNotFound, req.Pid)
	}
	return &st, nil
}

func (f *fakeGuest) ReadFile(_ context.Context, req *agentproto.ReadFileRequest) (*agentproto.ReadFileResponse, error) {
	if err := f.record(agentproto.OpReadFile, *req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirs[req.Path] {
		return nil, fmt.Errorf("%w: %s", agentproto.ErrIsDir, req.Path)
	}
	s, ok := f.files[req.Path]
	if !ok {
		return nil, notFound(req.Path)
	}
	resp := &agentproto.ReadFileResponse{Size: int64(len(s))}
	data := s
	if req.StartLine > 0 || req.LineCount > 0 || req.TailLines > 0 {
		lines := strings.SplitAfter(s, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		resp.TotalLines = len(lines)
		first := max(req.StartLine, 1) - 1
		end := len(lines)
		if req.LineCount > 0 {
			end = min(end, first+req.LineCount)
		}
		if req.TailLines > 0 {
			first = max(0, len(lines)-req.TailLines)
		}
		data = ""
		if first < end {
			data = strings.Join(lines[first:end], "")
		}
	}
	if req.MaxBytes > 0 && int64(len(data)) > req.MaxBytes {
		resp.Truncated = true
		if req.TailLines > 0 {
			data = data[int64(len(data))-req.MaxBytes:]
		} else {
			data = data[:req.MaxBytes]
		}
	}
	resp.Data = []byte(data)
	return resp, nil
}

func (f *fakeGuest) WriteFile(_ context.Context, req *agentproto.WriteFileRequest) (*agentproto.WriteFileResponse, error) {
	if err := f.record(agentproto.OpWriteFile, *req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	isDir := f.dirs[req.Path]
	old := f.files[req.Path]
	f.mu.Unlock()
	if isDir {
		return nil, fmt.Errorf("%w: %s", agentproto.ErrIsDir, req.Path)
	}
	data := string(req.Data)
	if req.Append {
		data = old + data
	}
	f.put(req.Path, data)
	return &agentproto.WriteFileResponse{Size: int64(len(data))}, nil
}

func (f *fakeGuest) Stat(_ context.Context, req *agentproto.PathRequest) (*agentproto.FileInfo, error) {
	if err := f.record(agentproto.OpStat, *req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fi := &agentproto.FileInfo{Path: req.Path, Name: path.Base(req.Path)}
	switch _, file := f.files[req.Path]; {
	case f.links[req.Path] != "":
		fi.Type, fi.SymlinkTarget = "symlink", f.links[req.Path]
	case f.dirs[req.Path]:
		fi.Type = "dir"
	case file:
		fi.Type, fi.Size = "file", int64(len(f.files[req.Path]))
	default:
		return nil, notFound(req.Path)
	}
	return fi, nil
}

func (f *fakeGuest) List(_ context.Context, req *agentproto.ListRequest) (*agentproto.ListResponse, error) {
	if err := f.record(agentproto.OpList, *req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[req.Path]; ok {
		return nil, fmt.Errorf("%w: %s", agentproto.ErrNotDir, req.Path)
	}
	if !f.dirs[req.Path] {
		return nil, notFound(req.Path)
	}
	depth := max(req.MaxDepth, 1)
	var names []string
	for p := range f.files {
		names = append(names, p)
	}
	for p := range f.dirs {
		names = append(names, p)
	}
	slices.Sort(names)
	resp := &agentproto.ListResponse{Entries: []agentproto.FileInfo{}}
	for _, p := range names {
		rel, ok := strings.CutPrefix(p, req.Path+"/")
		if !ok || strings.Count(rel, "/") >= depth {
			continue
		}
		if req.MaxEntries > 0 && len(resp.Entries) == req.MaxEntries {
			resp.Truncated = true
			break
		}
		fi := agentproto.FileInfo{Path: rel, Name: path.Base(p), Type: "file", Size: int64(len(f.files[p]))}
		if f.dirs[p] {
			fi.Type, fi.Size = "dir", 0
		}
		resp.Entries = append(resp.Entries, fi)
	}
	return resp, nil
}

func (f *fakeGuest) Mkdir(_ context.Context, req *agentproto.PathRequest) (*agentproto.Empty, error) {
	if err := f.record(agentproto.OpMkdir, *req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.dirs[req.Path] = true
	f.mu.Unlock()
	return &agentproto.Empty{}, nil
}

func (f *fakeGuest) Remove(_ context.Context, req *agentproto.PathRequest) (*agentproto.Empty, error) {
	if err := f.record(agentproto.OpRemove, *req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[req.Path]; ok {
		delete(f.files, req.Path)
		return &agentproto.Empty{}, nil
	}
	if !f.dirs[req.Path] {
		return nil, notFound(req.Path)
	}
	for p := range f.files {
		if strings.HasPrefix(p, req.Path+"/") {
			if !req.Recursive {
				return nil, fmt.Errorf("%w: %s", agentproto.ErrNotEmpty, req.Path)
			}
			delete(f.files, p)
		}
	}
	delete(f.dirs, req.Path)
	return &agentproto.Empty{}, nil
}

func (f *fakeGuest) Move(_ context.Context, req *agentproto.MoveRequest) (*agentproto.Empty, error) {
	if err := f.record(agentproto.OpMove, *req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.files[req.Src]
	if !ok {
		return nil, notFound(req.Src)
	}
	if _, exists := f.files[req.Dst]; exists && !req.Overwrite {
		return nil, fmt.Errorf("%w: %s", agentproto.ErrExists, req.Dst)
	}
	if !f.dirs[path.Dir(req.Dst)] {
		return nil, notFound(req.Dst)
	}
	delete(f.files, req.Src)
	f.files[req.Dst] = s
	return &agentproto.Empty{}, nil
}

func (f *fakeGuest) UserAdd(_ context.Context, req *agentproto.UserAddRequest) (*agentproto.UserAddResponse, error) {
	if err := f.record(agentproto.OpUserAdd, *req); err != nil {
		return nil, err
	}
	return &agentproto.UserAddResponse{UID: 1000, GID: 1000, Home: req.Home, Created: true}, nil
}

func (f *fakeGuest) UserDel(_ context.Context, req *agentproto.UserDelRequest) (*agentproto.Empty, error) {
	return &agentproto.Empty{}, f.record(agentproto.OpUserDel, *req)
}

func (f *fakeGuest) Shutdown(context.Context, *agentproto.ShutdownRequest) (*agentproto.Empty, error) {
	return nil, agentproto.ErrUnsupported
}

// Test fixtures.

func testAgent(slug string, enabled, background bool) agents.Agent {
	ae := agents.DefaultAutonomousExec()
	ae.Enabled, ae.BackgroundProcesses = enabled, background
	ae.MaxCommandsPerTurn = 100
	return agents.Agent{ID: "id-" + slug, Name: strings.ToUpper(slug[:1]) + slug[1:], Slug: slug, AutonomousExec: ae}
}

type harness struct {
	t     *testing.T
	guest *fakeGuest
	env   *Env
	ts    *Toolset
}

// newHarness gives bob (autonomous exec and background on) a toolset
// against a fresh fake guest.
func newHarness(t *testing.T, opts ...func(*Options)) *harness {
	return newHarnessOn(t, newFakeGuest(), opts...)
}

// newHarnessOn is newHarness with a prepared fake guest.
func newHarnessOn(t *testing.T, f *fakeGuest, opts ...func(*Options)) *harness {
	c := f.connect(t)
	o := Options{
		Guest:    func(context.Context) (*agentproto.Client, error) { return c, nil },
		TurnIdle: time.Hour,
	}
	for _, fn := range opts {
		fn(&o)
	}
	env := NewEnv(o)
	return &harness{t: t, guest: f, env: env, ts: env.Toolset(testAgent("bob", true, true))}
}

// call runs a tool with args given as a Go value (or a raw JSON string)
// and returns the parsed envelope.
func (h *harness) call(name string, args any) envelope.Envelope {
	h.t.Helper()
	var raw []byte
	if s, ok := args.(string); ok {
		raw = []byte(s)
	} else {
		var err error
		if raw, err = json.Marshal(args); err != nil {
			h.t.Fatal(err)
		}
	}
	out := h.ts.Call(context.Background(), name, raw)
	e, err := envelope.Parse(out)
	if err != nil {
		h.t.Fatalf("%s returned %q: %v", name, out, err)
	}
	return e
}

// ok fails unless e is a success and returns its result as a map.
func ok(t *testing.T, e envelope.Envelope) map[string]any {
	t.Helper()
	if !e.OK {
		t.Fatalf("%s failed: %s: %s", e.Tool, e.Kind, e.Message)
	}
	m, _ := e.Result.(map[string]any)
	return m
}

// failed fails unless e is a failure of kind (and field, when given).
func failed(t *testing.T, e envelope.Envelope, kind envelope.Kind, field string) {
	t.Helper()
	if e.OK {
		t.Fatalf("%s succeeded with %v, want %s", e.Tool, e.Result, kind)
	}
	if e.Kind != kind || e.Field != field || e.Retryable != kind.Retryable() {
		t.Fatalf("%s: kind %s field %q retryable %v (%s), want %s field %q", e.Tool, e.Kind, e.Field, e.Retryable, e.Message, kind, field)
	}
}

// printer makes an exec func that writes stdout and stderr and exits.
func printer(stdout, stderr string, st agentproto.ExitStatus) func(*agentproto.ExecRequest, agentproto.ExecIO) (agentproto.ExitStatus, error) {
	return func(_ *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
		eio.Stdout.Write([]byte(stdout))
		eio.Stderr.Write([]byte(stderr))
		st.Exited = true
		return st, nil
	}
}
