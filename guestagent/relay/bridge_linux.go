//go:build linux

package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/network"
	"golang.org/x/sys/unix"
)

// BridgeSocket is where processes in the guest reach the host API bridge.
const BridgeSocket = "/run/osaurus-bridge.sock"

// bridgeRelay relays connections to the guest's bridge socket to the host
// over whichever agent session is current. There is no TCP path to the
// host and no token: the identity attached to each connection is the
// connecting process's uid as the kernel reports it.
type bridgeRelay struct {
	once sync.Once
	mu   sync.Mutex
	peer *agentproto.Peer
}

// Bounds of the relay: each connection holds a descriptor in PID 1.
const (
	maxBridgeConnsPerAgent = 32
	maxBridgeConns         = 512
	// bridgeIdleTimeout ends a relay that moved no byte either way for
	// that long (the host's server closes idle keep-alives sooner; this
	// holds whatever the host does).
	bridgeIdleTimeout = 10 * time.Minute
)

// bridgeConns caps the relay's connections per caller (agent, or uid
// for callers that are no agent).
var bridgeConns = network.NewConnLimiter("host API bridge", maxBridgeConnsPerAgent, maxBridgeConns)

// bridge is package state: there is one socket per guest, whichever
// Relay the agent made.
var bridge bridgeRelay

// Start makes peer the session new bridge connections are relayed over
// and, the first time, starts listening on the socket. The caller decides
// whether a transport may listen: the stdio one (development, tests on a
// host) must not, as it is not the guest's init and must not claim /run.
func (s *Relay) Start(ctx context.Context, peer *agentproto.Peer) {
	bridge.mu.Lock()
	bridge.peer = peer
	bridge.mu.Unlock()
	bridge.once.Do(func() {
		go func() {
			if err := s.listenBridge(context.WithoutCancel(ctx), BridgeSocket); err != nil {
				s.log.Printf("host bridge: %v", err)
			}
		}()
	})
}

func (s *Relay) listenBridge(ctx context.Context, path string) error {
	os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen %s: %w", path, err)
	}
	defer l.Close()
	// Every agent user may connect; who they are is read per connection.
	if err := os.Chmod(path, 0o666); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.Printf("host bridge accept: %v", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go s.relayBridge(ctx, c)
	}
}

func (s *Relay) relayBridge(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	req, pid, err := peerIdentity(c, s.users.WithDefaults().Passwd)
	if err != nil {
		writeHTTPError(c, http.StatusInternalServerError, "reading the caller's identity: "+err.Error())
		return
	}
	if req.Agent != "" && s.cfg.NetPolicy != nil {
		attribute(&req, pid, s.cfg.NetPolicy)
	}
	key := req.Agent
	if key == "" {
		key = "uid " + strconv.Itoa(req.UID)
	}
	release, err := bridgeConns.Acquire(key)
	if err != nil {
		writeHTTPError(c, http.StatusTooManyRequests, err.Error())
		return
	}
	defer release()
	bridge.mu.Lock()
	peer := bridge.peer
	bridge.mu.Unlock()
	if peer == nil || peer.Err() != nil {
		writeHTTPError(c, http.StatusServiceUnavailable, "the host is not connected to this guest; start the sandbox from the app or `osaurus-sandbox start`")
		return
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	hc, err := peer.OpenConn(octx, agentproto.OpBridge, req)
	cancel()
	if err != nil {
		writeHTTPError(c, http.StatusServiceUnavailable, "the host API bridge is not available: "+err.Error())
		return
	}
	defer hc.Close()
	last := new(atomic.Int64)
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	go func() {
		// caller → host; the caller hanging up ends the relay.
		network.CopyIdleFor(hc, c, c, last, bridgeIdleTimeout)
		hc.Close()
		close(done)
	}()
	network.CopyIdleFor(c, hc, hc, last, bridgeIdleTimeout)
	c.Close()
	<-done
}

// peerIdentity reads the connecting process's uid from the kernel and
// names it from the account file.
func peerIdentity(c *net.UnixConn, passwd string) (agentproto.BridgeRequest, int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return agentproto.BridgeRequest{}, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return agentproto.BridgeRequest{}, 0, err
	}
	if cerr != nil {
		return agentproto.BridgeRequest{}, 0, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	req := agentproto.BridgeRequest{UID: int(cred.Uid), User: userOfUID(passwd, int(cred.Uid))}
	req.Agent = AgentOfUser(req.User, req.UID)
	return req, int(cred.Pid), nil
}

// attribute tells whose command an agent's caller is from the network
// namespace it runs in: the agent's own (or the guest's, where no plugin
// can be), a plugin's (req.Plugin), or one the guest did not make, whose
// caller could be either (req.Unattributed). A namespace that can't be
// read counts as not made by the guest: fail closed.
func attribute(req *agentproto.BridgeRequest, pid int, np *network.NetPolicy) {
	ino, err := netnsInode(strconv.Itoa(pid))
	if err != nil {
		req.Unattributed = true
		return
	}
	if root, err := netnsInode("1"); err == nil && ino == root {
		return
	}
	user, scope, ok := np.Attribute(ino)
	switch {
	case !ok || user != req.User:
		req.Unattributed = true
	case scope != "":
		req.Plugin = scope
	}
}

// netnsInode is the inode of the network namespace of process pid.
func netnsInode(pid string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/ns/net", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// AgentOfUser maps a Linux user to the agent it belongs to: "agent-<name>"
// with a non-system uid. Root and system users belong to no agent.
func AgentOfUser(user string, uid int) string {
	name, ok := strings.CutPrefix(user, "agent-")
	if !ok || name == "" || uid < 1000 || uid == 65534 {
		return ""
	}
	return name
}

// userOfUID returns the name of uid in the passwd file, or "".
func userOfUID(passwd string, uid int) string {
	f, err := os.Open(passwd)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if n, err := strconv.Atoi(fields[2]); err == nil && n == uid {
			return fields[0]
		}
	}
	return ""
}

// writeHTTPError answers a caller the guest cannot relay, in the bridge's
// own shape, so osaurus-host and curl show the reason.
// The request is read first: closing a socket with unread data would make
// the caller see a reset instead of the answer.
func writeHTTPError(c *net.UnixConn, code int, msg string) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if r, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
		io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	}
	w := c
	body, _ := json.Marshal(map[string]string{"error": msg})
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}
