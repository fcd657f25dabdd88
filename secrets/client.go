package secrets

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zalando/go-keyring"
)

// The client store (secretStore "client"): a sandbox on a server reached
// through a remote context keeps no secrets of its own. Its owner asks a
// front end connected from the user's machine (Clients), which answers
// from that machine's store, under a service name of its context only
// (Provide). The requests travel over the control socket, i.e. the user's
// ssh; values are never logged on either side.

// ClientRequest is what the owner asks a connected front end: Op is "get",
// "set" or "delete"; Service is the owner's service name, which the front
// end does not use (it maps every request into its context's namespace).
type ClientRequest struct {
	ID      uint64 `json:"id"`
	Op      string `json:"op"`
	Service string `json:"service"`
	Entry   string `json:"entry"`
	Value   string `json:"value,omitempty"`
}

// ClientAnswer answers the ClientRequest of the same ID: Value for a get,
// NotFound when the entry is absent, or Error, the front end's words.
type ClientAnswer struct {
	ID       uint64 `json:"id"`
	Value    string `json:"value,omitempty"`
	NotFound bool   `json:"notFound,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ClientTimeout bounds one forwarded request: a front end that stops
// answering (a stalled link, a keychain prompt left open) fails the
// caller rather than hanging its tool call.
const ClientTimeout = 30 * time.Second

// maxClientLine bounds one message either way: the largest value with
// its JSON escaping, and room for the rest.
const maxClientLine = 8*MaxValueBytes + 4096

// ErrNoClient: secretStore is "client" and no front end offers its
// machine's secrets now. It is ErrUnavailable.
var ErrNoClient error = &storeError{msg: "secret store: no machine that holds this sandbox's secrets is connected (secretStore client): connect with `osaurus-sandbox --context NAME …` (an `mcp --agent` session, or the window) from your machine"}

// Clients are the front ends that offer their machine's secrets to this
// owner, the backend of secretStore "client". Requests go to the one that
// connected last: several may be connected at once (two MCP sessions),
// and each reads the same machine's store.
type Clients struct {
	// Timeout bounds each request; 0 is ClientTimeout.
	Timeout time.Duration

	mu    sync.Mutex
	conns []*clientConn // oldest first
	seq   uint64
}

type clientConn struct {
	w   io.Writer
	wmu sync.Mutex

	mu      sync.Mutex
	pending map[uint64]chan ClientAnswer
	done    chan struct{} // closed when the connection ended
}

// Connected is how many front ends offer their secrets now.
func (c *Clients) Connected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// Serve makes conn (the control socket's stream of a front end that
// offered its secrets) a provider until it ends or ctx does; it closes
// conn. Requests in flight on it then fail at once.
func (c *Clients) Serve(ctx context.Context, conn io.ReadWriteCloser) error {
	cc := &clientConn{w: conn, pending: map[uint64]chan ClientAnswer{}, done: make(chan struct{})}
	c.mu.Lock()
	c.conns = append(c.conns, cc)
	c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer func() {
		stop()
		conn.Close()
		c.mu.Lock()
		for i, x := range c.conns {
			if x == cc {
				c.conns = append(c.conns[:i], c.conns[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		close(cc.done)
	}()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, 64<<10), maxClientLine)
	for sc.Scan() {
		var a ClientAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return fmt.Errorf("secret store: a bad answer from the connected machine: %v", err)
		}
		cc.mu.Lock()
		ch := cc.pending[a.ID]
		delete(cc.pending, a.ID)
		cc.mu.Unlock()
		if ch != nil {
			ch <- a // buffered: the asker may have given up
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}

func (c *Clients) latest() *clientConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.conns) == 0 {
		return nil
	}
	return c.conns[len(c.conns)-1]
}

// Pending is how many forwarded requests wait for an answer now.
func (c *Clients) Pending() int {
	c.mu.Lock()
	conns := slices.Clone(c.conns)
	c.mu.Unlock()
	n := 0
	for _, cc := range conns {
		cc.mu.Lock()
		n += len(cc.pending)
		cc.mu.Unlock()
	}
	return n
}

// do forwards one request to the latest front end and waits for its
// answer, the connection's end, the deadline or ctx's end (the tool call
// or the client that asked went away: nobody waits for the answer, which
// is dropped when it comes).
func (c *Clients) do(ctx context.Context, req ClientRequest) (ClientAnswer, error) {
	if err := ctx.Err(); err != nil {
		return ClientAnswer{}, err
	}
	cc := c.latest()
	if cc == nil {
		return ClientAnswer{}, ErrNoClient
	}
	c.mu.Lock()
	c.seq++
	req.ID = c.seq
	c.mu.Unlock()
	ch := make(chan ClientAnswer, 1)
	cc.mu.Lock()
	cc.pending[req.ID] = ch
	cc.mu.Unlock()
	defer func() {
		cc.mu.Lock()
		delete(cc.pending, req.ID)
		cc.mu.Unlock()
	}()
	b, err := json.Marshal(req)
	if err != nil {
		return ClientAnswer{}, err
	}
	// Written aside: a stalled link can block the write too, and the
	// deadline and ctx cover it (the write ends when the connection
	// does).
	werr := make(chan error, 1)
	go func() {
		cc.wmu.Lock()
		defer cc.wmu.Unlock()
		_, err := cc.w.Write(append(b, '\n'))
		werr <- err
	}()
	timeout := c.Timeout
	if timeout == 0 {
		timeout = ClientTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case err := <-werr:
			if err != nil {
				return ClientAnswer{}, &storeError{msg: "secret store: the machine that holds this sandbox's secrets could not be asked: " + err.Error(), err: err}
			}
			continue
		case a := <-ch:
			return a, nil
		case <-cc.done:
			// It may have answered just before it went.
			select {
			case a := <-ch:
				return a, nil
			default:
			}
			return ClientAnswer{}, &storeError{msg: "secret store: the machine that holds this sandbox's secrets disconnected before it answered; connect again with `osaurus-sandbox --context NAME …` from your machine"}
		case <-t.C:
			return ClientAnswer{}, &storeError{msg: fmt.Sprintf("secret store: the machine that holds this sandbox's secrets did not answer within %v", timeout)}
		case <-ctx.Done():
			return ClientAnswer{}, ctx.Err()
		}
	}
}

func (c *Clients) answer(ctx context.Context, req ClientRequest) (string, error) {
	a, err := c.do(ctx, req)
	switch {
	case err != nil:
		return "", err
	case a.NotFound:
		return "", keyring.ErrNotFound
	case a.Error != "":
		return "", &storeError{msg: "secret store: the machine that holds this sandbox's secrets: " + a.Error}
	}
	return a.Value, nil
}

func (c *Clients) Get(service, user string) (string, error) {
	return c.GetContext(context.Background(), service, user)
}

func (c *Clients) Set(service, user, value string) error {
	return c.SetContext(context.Background(), service, user, value)
}

func (c *Clients) Delete(service, user string) error {
	return c.DeleteContext(context.Background(), service, user)
}

// GetContext is Get, given up when ctx ends (ContextBackend).
func (c *Clients) GetContext(ctx context.Context, service, user string) (string, error) {
	return c.answer(ctx, ClientRequest{Op: "get", Service: service, Entry: user})
}

// SetContext is Set, given up when ctx ends. The front end may still
// store the value: only the wait is given up.
func (c *Clients) SetContext(ctx context.Context, service, user, value string) error {
	_, err := c.answer(ctx, ClientRequest{Op: "set", Service: service, Entry: user, Value: value})
	return err
}

// DeleteContext is Delete, given up when ctx ends.
func (c *Clients) DeleteContext(ctx context.Context, service, user string) error {
	_, err := c.answer(ctx, ClientRequest{Op: "delete", Service: service, Entry: user})
	return err
}

// Where names the store in messages.
func (c *Clients) Where() string {
	return "the keychain of the machine that drives this sandbox"
}

// ClientService is the service name under which this machine keeps the
// secrets of the sandbox of context ctxName: one remote can never reach
// another's entries, nor the local sandbox's.
func ClientService(ctxName string) string { return ServiceName() + "/ctx/" + ctxName }

// ForContext is this machine's store (b) of the sandbox of context
// ctxName: its entries under ClientService(ctxName).
func ForContext(b Backend, ctxName string) *Store {
	return &Store{B: InService{B: b, Service: ClientService(ctxName)}}
}

// InService is B with every entry under Service, whatever service name
// its caller gives: this machine's store of one context's sandbox, for
// the `secret` commands through that context and for Provide.
type InService struct {
	B       Backend
	Service string
}

func (n InService) Get(_, user string) (string, error) { return n.B.Get(n.Service, user) }
func (n InService) Set(_, user, value string) error    { return n.B.Set(n.Service, user, value) }
func (n InService) Delete(_, user string) error        { return n.B.Delete(n.Service, user) }
func (n InService) Where() string                      { return where(n.B) }

// checkEntry accepts only the entries a Store makes: agent/KEY, an
// agent's index (agent/) and the app's (:app/KEY).
func checkEntry(e string) error {
	agent, key, ok := strings.Cut(e, "/")
	if agent == AppScope && CheckKey(key) == nil {
		return nil
	}
	if !ok || checkAgent(agent) != nil || key != "" && CheckKey(key) != nil {
		return fmt.Errorf("%w: %q is not an entry of an agent's secrets", ErrInvalid, e)
	}
	return nil
}

// Provide answers the requests of an owner whose secretStore is "client"
// on conn (its control socket's stream) from b, always under service
// (ClientService of the context): the service name the owner sends is
// ignored, so no request can reach other entries. It returns when conn
// ends or ctx does, closing conn. Values are never logged.
func Provide(ctx context.Context, conn io.ReadWriteCloser, b Backend, service string) error {
	in := InService{B: b, Service: service}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, 64<<10), maxClientLine)
	for sc.Scan() {
		var req ClientRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("secret requests: a bad request from the far side: %v", err)
		}
		a := ClientAnswer{ID: req.ID}
		var err error
		if err = checkEntry(req.Entry); err == nil {
			switch req.Op {
			case "get":
				a.Value, err = in.Get(req.Service, req.Entry)
			case "set":
				if len(req.Value) > maxClientLine/2 {
					err = fmt.Errorf("%w: a value of %d bytes is too large", ErrInvalid, len(req.Value))
				} else {
					err = in.Set(req.Service, req.Entry, req.Value)
				}
			case "delete":
				err = in.Delete(req.Service, req.Entry)
			default:
				err = fmt.Errorf("%w: unknown request %q", ErrInvalid, req.Op)
			}
		}
		switch {
		case errors.Is(err, keyring.ErrNotFound), errors.Is(err, ErrNotFound):
			a.NotFound = true
		case err != nil:
			a.Error = err.Error()
		}
		out, _ := json.Marshal(a)
		if _, err := conn.Write(append(out, '\n')); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}
