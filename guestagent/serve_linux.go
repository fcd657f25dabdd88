//go:build linux

package guestagent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mdlayher/vsock"
	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Transport names reported in HelloResponse.Transport.
const (
	TransportSerial = "virtio-serial"
	TransportVsock  = "vsock"
	TransportStdio  = "stdio"
)

// ServeConn serves one session on conn until the host disconnects or ctx
// ends. conn is closed on return.
func (s *Service) ServeConn(ctx context.Context, conn io.ReadWriteCloser, transport string) error {
	peer, err := agentproto.NewServerPeer(conn)
	if err != nil {
		conn.Close()
		return err
	}
	defer peer.Close(nil)
	if transport != TransportStdio {
		s.relay.Start(ctx, peer)
	}
	return peer.Serve(WithTransport(ctx, transport), agentproto.ServiceMux(recovering{s}))
}

// FindVirtioPort returns the /dev node of the virtio-serial port called
// name, looking the names up under sysDir (normally
// /sys/class/virtio-ports).
func FindVirtioPort(sysDir, name string) (string, error) {
	ents, err := os.ReadDir(sysDir)
	if err != nil {
		return "", fmt.Errorf("virtio ports: %w", err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(sysDir, e.Name(), "name"))
		if err == nil && strings.TrimSpace(string(b)) == name {
			return "/dev/" + e.Name(), nil
		}
	}
	return "", fmt.Errorf("%w: no virtio-serial port named %q", agentproto.ErrNotFound, name)
}

// ServeSerial serves sessions on the virtio-serial port called name until
// ctx ends. A port whose host side is closed reads EOF at once, which ends
// the session; the loop then reopens the port and waits for the host. A
// host that went away may not be seen to (the next connected before the
// guest read the EOF), so every session starts with the host's claim
// (agentproto.ClaimStream), which also ends a session still holding the
// port.
func (s *Service) ServeSerial(ctx context.Context, name string) {
	const retry = 250 * time.Millisecond
	warned := false
	for ctx.Err() == nil {
		dev, err := FindVirtioPort("/sys/class/virtio-ports", name)
		var f *os.File
		if err == nil {
			f, err = os.OpenFile(dev, os.O_RDWR, 0)
		}
		if err != nil {
			if !warned {
				s.log.Printf("virtio-serial port %s: %v (retrying)", name, err)
				warned = true
			}
		} else {
			warned = false
			start := time.Now()
			err := agentproto.AcceptClaim(f)
			if err == nil {
				err = s.ServeConn(ctx, f, TransportSerial)
			} else {
				f.Close()
			}
			// A session that ends at once is the unconnected port reading
			// EOF: not worth a console line every retry.
			if time.Since(start) > time.Second {
				s.log.Printf("virtio-serial session ended: %v", err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

// ServeVsock listens on a vsock port and serves every connection as its
// own session until ctx ends.
func (s *Service) ServeVsock(ctx context.Context, port uint32) error {
	l, err := vsock.Listen(port, nil)
	if err != nil {
		return fmt.Errorf("vsock listen %d: %w", port, err)
	}
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.Printf("vsock accept: %v", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if !fromHost(conn.RemoteAddr()) {
			s.log.Printf("vsock: refused a connection from %s: only the host may connect", conn.RemoteAddr())
			conn.Close()
			continue
		}
		go func() {
			err := s.ServeConn(ctx, conn, TransportVsock)
			s.log.Printf("vsock session from %s ended: %v", conn.RemoteAddr(), err)
		}()
	}
}

// recovering turns a panic in an operation into an ErrInternal response:
// as PID 1 the agent must not die, or the kernel panics.
type recovering struct{ s *Service }

func (r recovering) catch(op string, start time.Time, err *error) {
	if p := recover(); p != nil {
		r.s.log.Printf("panic in %s: %v\n%s", op, p, debug.Stack())
		*err = fmt.Errorf("%w: %s: panic: %v", agentproto.ErrInternal, op, p)
	}
	if r.s.cfg.Debug {
		r.s.log.Printf("%s: %v (%v)", op, *err, time.Since(start).Round(time.Microsecond))
	}
}

func (r recovering) Hello(ctx context.Context, req *agentproto.HelloRequest) (_ *agentproto.HelloResponse, err error) {
	defer r.catch(agentproto.OpHello, time.Now(), &err)
	return r.s.Hello(ctx, req)
}

func (r recovering) NetLog(ctx context.Context, req *agentproto.NetLogRequest) (_ *agentproto.NetLogResponse, err error) {
	defer r.catch(agentproto.OpNetLog, time.Now(), &err)
	return r.s.NetLog(ctx, req)
}

func (r recovering) NetRelease(ctx context.Context, req *agentproto.NetReleaseRequest) (_ *agentproto.Empty, err error) {
	defer r.catch(agentproto.OpNetRelease, time.Now(), &err)
	return r.s.NetRelease(ctx, req)
}

func (r recovering) Exec(ctx context.Context, req *agentproto.ExecRequest, eio agentproto.ExecIO) (_ agentproto.ExitStatus, err error) {
	defer r.catch(agentproto.OpExec, time.Now(), &err)
	return r.s.Exec(ctx, req, eio)
}

func (r recovering) StartBackground(ctx context.Context, req *agentproto.StartBackgroundRequest) (_ *agentproto.StartBackgroundResponse, err error) {
	defer r.catch(agentproto.OpStartBg, time.Now(), &err)
	return r.s.StartBackground(ctx, req)
}

func (r recovering) Signal(ctx context.Context, req *agentproto.SignalRequest) (_ *agentproto.Empty, err error) {
	defer r.catch(agentproto.OpSignal, time.Now(), &err)
	return r.s.Signal(ctx, req)
}

func (r recovering) Wait(ctx context.Context, req *agentproto.WaitRequest) (_ *agentproto.ExitStatus, err error) {
	defer r.catch(agentproto.OpWait, time.Now(), &err)
	return r.s.Wait(ctx, req)
}

func (r recovering) ReadFile(ctx context.Context, req *agentproto.ReadFileRequest) (_ *agentproto.ReadFileResponse, err error) {
	defer r.catch(agentproto.OpReadFile, time.Now(), &err)
	return r.s.ReadFile(ctx, req)
}

func (r recovering) WriteFile(ctx context.Context, req *agentproto.WriteFileRequest) (_ *agentproto.WriteFileResponse, err error) {
	defer r.catch(agentproto.OpWriteFile, time.Now(), &err)
	return r.s.WriteFile(ctx, req)
}

func (r recovering) Stat(ctx context.Context, req *agentproto.PathRequest) (_ *agentproto.FileInfo, err error) {
	defer r.catch(agentproto.OpStat, time.Now(), &err)
	return r.s.Stat(ctx, req)
}

func (r recovering) List(ctx context.Context, req *agentproto.ListRequest) (_ *agentproto.ListResponse, err error) {
	defer r.catch(agentproto.OpList, time.Now(), &err)
	return r.s.List(ctx, req)
}

func (r recovering) Mkdir(ctx context.Context, req *agentproto.PathRequest) (_ *agentproto.Empty, err error) {
	defer r.catch(agentproto.OpMkdir, time.Now(), &err)
	return r.s.Mkdir(ctx, req)
}

func (r recovering) Remove(ctx context.Context, req *agentproto.PathRequest) (_ *agentproto.Empty, err error) {
	defer r.catch(agentproto.OpRemove, time.Now(), &err)
	return r.s.Remove(ctx, req)
}

func (r recovering) Move(ctx context.Context, req *agentproto.MoveRequest) (_ *agentproto.Empty, err error) {
	defer r.catch(agentproto.OpMove, time.Now(), &err)
	return r.s.Move(ctx, req)
}

func (r recovering) UserAdd(ctx context.Context, req *agentproto.UserAddRequest) (_ *agentproto.UserAddResponse, err error) {
	defer r.catch(agentproto.OpUserAdd, time.Now(), &err)
	return r.s.UserAdd(ctx, req)
}

func (r recovering) UserDel(ctx context.Context, req *agentproto.UserDelRequest) (_ *agentproto.Empty, err error) {
	defer r.catch(agentproto.OpUserDel, time.Now(), &err)
	return r.s.UserDel(ctx, req)
}

func (r recovering) UserLimit(ctx context.Context, req *agentproto.UserLimitRequest) (_ *agentproto.Empty, err error) {
	defer r.catch(agentproto.OpUserLimit, time.Now(), &err)
	return r.s.UserLimit(ctx, req)
}

func (r recovering) Shutdown(ctx context.Context, req *agentproto.ShutdownRequest) (_ *agentproto.Empty, err error) {
	defer r.catch(agentproto.OpShutdown, time.Now(), &err)
	return r.s.Shutdown(ctx, req)
}

func (r recovering) Usage(ctx context.Context, req *agentproto.UsageRequest) (_ *agentproto.UsageResponse, err error) {
	defer r.catch(agentproto.OpUsage, time.Now(), &err)
	return r.s.Usage(ctx, req)
}
