//go:build linux

package guestagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/exec"
	"github.com/osaurus/osaurus-sandbox/guestagent/files"
	"github.com/osaurus/osaurus-sandbox/guestagent/network"
	"github.com/osaurus/osaurus-sandbox/guestagent/relay"
	"golang.org/x/sys/unix"
)

// Config configures a Service.
type Config struct {
	// AgentVersion is reported by Hello.
	AgentVersion string
	// Reaper collects the exit status of every process the service starts.
	// Required.
	Reaper *exec.Reaper
	// Users names the account files; zero fields mean /etc.
	Users account.UserDB
	// ProcDir is where processes are listed for UserDel; default /proc.
	ProcDir string
	// SystemRoot is where Hello looks for etc/os-release and the package
	// manager; default "/".
	SystemRoot string
	// SetClock lets Hello set the system clock from the host's. Only the
	// VM's PID 1 should; a development agent must not touch its host.
	SetClock bool
	// Reseed lets Hello mix the host's seed into the kernel's random
	// pool (and reseed it). Only the VM's PID 1 should.
	Reseed bool
	// BootSeconds is the uptime at which the agent became ready.
	BootSeconds float64
	// Warnings are boot steps that failed without stopping the agent.
	Warnings []string
	// BootPhases are the boot steps' end times, reported by Hello.
	BootPhases []agentproto.BootPhase
	// PowerOff is called, after Shutdown responded, to end the VM. Nil
	// means Shutdown is refused (ErrUnsupported).
	PowerOff func(reboot bool)
	// Logger gets the agent's own messages; nil discards them.
	Logger *log.Logger
	// Debug logs every call.
	Debug bool
	// NetPolicy, when set, runs every non-root process in its user's
	// network namespace under the policy its request names. Only the
	// VM's PID 1 sets it; a development agent leaves the host alone.
	NetPolicy *network.NetPolicy
	// AfterFirstHello, when set, runs once, in its own goroutine, when
	// the host's first hello is answered: boot work the handshake need
	// not wait for.
	AfterFirstHello func()
	// Cgroups, when set, runs every call in its own cgroup that ends with
	// it, under its user's limits. Only the VM's PID 1 sets it.
	Cgroups *exec.Cgroups
}

// Service implements agentproto.Service inside the guest: it answers the
// handshake, user and limit operations itself and hands exec and file
// operations to the exec and files packages (their methods are promoted).
type Service struct {
	cfg   Config
	users account.UserDB
	log   *log.Logger

	*exec.Processes
	*files.Ops
	relay *relay.Relay

	// usersMu serialises edits of the account files within the agent; the
	// file lock in lockAccounts covers other programs.
	usersMu sync.Mutex

	warnMu   sync.Mutex
	warnings []string

	helloOnce sync.Once
	limits    limitTable
}

var _ agentproto.Service = (*Service)(nil)

// NewService returns a Service. cfg.Reaper is required.
func NewService(cfg Config) (*Service, error) {
	if cfg.Reaper == nil {
		return nil, errors.New("guestagent: Config.Reaper is required")
	}
	if cfg.ProcDir == "" {
		cfg.ProcDir = "/proc"
	}
	if cfg.SystemRoot == "" {
		cfg.SystemRoot = "/"
	}
	lg := cfg.Logger
	if lg == nil {
		lg = log.New(io.Discard, "", 0)
	}
	s := &Service{
		cfg:      cfg,
		users:    cfg.Users.WithDefaults(),
		log:      lg,
		warnings: append([]string(nil), cfg.Warnings...),
	}
	procs, err := exec.New(exec.Config{
		Users:      cfg.Users,
		Reaper:     cfg.Reaper,
		Cgroups:    cfg.Cgroups,
		NetPolicy:  cfg.NetPolicy,
		SystemRoot: cfg.SystemRoot,
		Limit:      s.checkLimit,
		Logger:     lg,
	})
	if err != nil {
		return nil, err
	}
	s.Processes = procs
	s.Ops = files.New(files.Config{Users: cfg.Users, Limit: s.checkLimit})
	s.relay = relay.New(relay.Config{Users: cfg.Users, NetPolicy: cfg.NetPolicy, Logger: lg})
	return s, nil
}

// AddWarning records a problem that Hello reports to the host, e.g. a
// transport that failed after boot.
func (s *Service) AddWarning(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.log.Print("warning: ", msg)
	s.warnMu.Lock()
	s.warnings = append(s.warnings, msg)
	s.warnMu.Unlock()
}

type transportKey struct{}

// WithTransport tags ctx with the transport a session runs on ("vsock",
// "virtio-serial"), which Hello reports.
func WithTransport(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, transportKey{}, name)
}

// account resolves the user an operation runs as.
func (s *Service) account(user string) (*account.Account, error) {
	a, err := s.users.Lookup(user)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// Hello answers the handshake and, when allowed, sets the clock (a VM
// restored or started without an RTC otherwise runs with a wrong date,
// which breaks TLS and make) and reseeds the random pool from the host's
// seed (a VM restored from a saved image otherwise repeats its randoms).
func (s *Service) Hello(ctx context.Context, req *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
	if s.cfg.SetClock && req.TimeUnixNano > 0 {
		host := time.Unix(0, req.TimeUnixNano)
		if d := time.Since(host); d > time.Second || d < -time.Second {
			tv := unix.NsecToTimeval(req.TimeUnixNano)
			if err := unix.Settimeofday(&tv); err != nil {
				s.AddWarning("set clock: %v", err)
			} else {
				s.log.Printf("clock set to host time (was off by %v)", d.Round(time.Millisecond))
			}
		}
	}
	if s.cfg.NetPolicy != nil {
		s.cfg.NetPolicy.SetHostAddrs(req.HostAddrs)
	}
	reseeded := false
	// A seed too short to count is ignored (a confused host, not
	// entropy), and says so only by Reseeded false.
	if s.cfg.Reseed && len(req.Seed) >= minSeed {
		if err := reseed(req.Seed); err != nil {
			s.AddWarning("reseed the random pool: %v", err)
		} else {
			reseeded = true
		}
	}
	resp := &agentproto.HelloResponse{
		Reseeded:     reseeded,
		Major:        agentproto.VersionMajor,
		Minor:        agentproto.VersionMinor,
		AgentVersion: s.cfg.AgentVersion,
		Arch:         runtime.GOARCH,
		BootSeconds:  s.cfg.BootSeconds,
		BootPhases:   s.cfg.BootPhases,
	}
	if s.cfg.SetClock {
		// Only PID 1's uptime is the VM's boot time line.
		resp.UptimeSeconds = BootClock()
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		resp.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	resp.Distro = osReleaseID(filepath.Join(s.cfg.SystemRoot, "etc/os-release"))
	switch {
	case isFile(filepath.Join(s.cfg.SystemRoot, "sbin/apk")):
		resp.PackageMgr = "apk"
	case isFile(filepath.Join(s.cfg.SystemRoot, "usr/bin/apt-get")):
		resp.PackageMgr = "apt"
	}
	if t, ok := ctx.Value(transportKey{}).(string); ok {
		resp.Transport = t
	}
	s.warnMu.Lock()
	resp.Warnings = append([]string(nil), s.warnings...)
	s.warnMu.Unlock()
	if s.cfg.AfterFirstHello != nil {
		s.helloOnce.Do(func() { go s.cfg.AfterFirstHello() })
	}
	return resp, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// osReleaseID returns the ID= value of an os-release file, or "".
func osReleaseID(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "ID="); ok {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// Uptime reads the system uptime in seconds from /proc/uptime.
func Uptime() (float64, error) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/uptime: empty")
	}
	return strconv.ParseFloat(f[0], 64)
}

// Shutdown responds, then powers the VM off (or reboots) a moment later so
// the response has time to reach the host.
func (s *Service) Shutdown(ctx context.Context, req *agentproto.ShutdownRequest) (*agentproto.Empty, error) {
	if s.cfg.PowerOff == nil {
		return nil, fmt.Errorf("%w: this agent does not own the machine", agentproto.ErrUnsupported)
	}
	reboot := req.Reboot
	go func() {
		time.Sleep(100 * time.Millisecond)
		s.cfg.PowerOff(reboot)
	}()
	return &agentproto.Empty{}, nil
}

// NetRelease frees a user's namespace for a plugin (uninstalled).
func (s *Service) NetRelease(ctx context.Context, req *agentproto.NetReleaseRequest) (*agentproto.Empty, error) {
	if !account.ValidUserName(req.User) {
		return nil, fmt.Errorf("%w: user %q", agentproto.ErrInvalid, req.User)
	}
	if req.Scope == "" {
		return nil, fmt.Errorf("%w: scope is empty; name the plugin whose namespace to free", agentproto.ErrInvalid)
	}
	if s.cfg.NetPolicy == nil {
		return &agentproto.Empty{}, nil
	}
	if err := s.cfg.NetPolicy.Release(req.User, req.Scope, false); err != nil {
		return nil, fmt.Errorf("%w: %v", agentproto.ErrInvalid, err)
	}
	return &agentproto.Empty{}, nil
}

// Usage reports the resource use of users from their cgroups.
func (s *Service) Usage(ctx context.Context, req *agentproto.UsageRequest) (*agentproto.UsageResponse, error) {
	return s.cfg.Cgroups.Usage(ctx, req)
}

// NetLog returns the refused connections the guest recorded. Without a
// network policy (a development agent) there is nothing to record.
func (s *Service) NetLog(ctx context.Context, req *agentproto.NetLogRequest) (*agentproto.NetLogResponse, error) {
	if s.cfg.NetPolicy == nil {
		return nil, fmt.Errorf("%w: this guest agent enforces no network policy, so it records no refusals", agentproto.ErrUnsupported)
	}
	return s.cfg.NetPolicy.Refusals(ctx, req), nil
}
