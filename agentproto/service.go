package agentproto

import "context"

// Service is what the guest agent implements. ServiceMux routes the
// protocol's operations to it.
type Service interface {
	Hello(context.Context, *HelloRequest) (*HelloResponse, error)
	Exec(ctx context.Context, req *ExecRequest, io ExecIO) (ExitStatus, error)
	StartBackground(context.Context, *StartBackgroundRequest) (*StartBackgroundResponse, error)
	Signal(context.Context, *SignalRequest) (*Empty, error)
	Wait(context.Context, *WaitRequest) (*ExitStatus, error)
	ReadFile(context.Context, *ReadFileRequest) (*ReadFileResponse, error)
	WriteFile(context.Context, *WriteFileRequest) (*WriteFileResponse, error)
	Stat(context.Context, *PathRequest) (*FileInfo, error)
	List(context.Context, *ListRequest) (*ListResponse, error)
	Mkdir(context.Context, *PathRequest) (*Empty, error)
	Remove(context.Context, *PathRequest) (*Empty, error)
	Move(context.Context, *MoveRequest) (*Empty, error)
	UserAdd(context.Context, *UserAddRequest) (*UserAddResponse, error)
	UserDel(context.Context, *UserDelRequest) (*Empty, error)
	Shutdown(context.Context, *ShutdownRequest) (*Empty, error)
}

// LimitService is implemented by a guest agent that enforces per-user
// limits set by the host.
type LimitService interface {
	UserLimit(context.Context, *UserLimitRequest) (*Empty, error)
}

// ServiceMux routes every operation of the protocol to svc.
func ServiceMux(svc Service) *Mux {
	m := NewMux()
	m.Handle(OpHello, Unary(svc.Hello))
	m.Handle(OpExec, Exec(svc.Exec))
	m.Handle(OpStartBg, Unary(svc.StartBackground))
	m.Handle(OpSignal, Unary(svc.Signal))
	m.Handle(OpWait, Unary(svc.Wait))
	m.Handle(OpReadFile, readFileHandler(svc.ReadFile))
	m.Handle(OpWriteFile, writeFileHandler(svc.WriteFile))
	m.Handle(OpStat, Unary(svc.Stat))
	m.Handle(OpList, Unary(svc.List))
	m.Handle(OpMkdir, Unary(svc.Mkdir))
	m.Handle(OpRemove, Unary(svc.Remove))
	m.Handle(OpMove, Unary(svc.Move))
	m.Handle(OpUserAdd, Unary(svc.UserAdd))
	m.Handle(OpUserDel, Unary(svc.UserDel))
	m.Handle(OpShutdown, Unary(svc.Shutdown))
	if nl, ok := svc.(NetLogService); ok {
		m.Handle(OpNetLog, Unary(nl.NetLog))
	}
	if u, ok := svc.(UsageService); ok {
		m.Handle(OpUsage, Unary(u.Usage))
	}
	if nr, ok := svc.(NetReleaseService); ok {
		m.Handle(OpNetRelease, Unary(nr.NetRelease))
	}
	if l, ok := svc.(LimitService); ok {
		m.Handle(OpUserLimit, Unary(l.UserLimit))
	}
	if pd, ok := svc.(PortDialService); ok {
		m.Handle(OpPortDial, portDialHandler(pd.PortDial))
	}
	return m
}

// UsageService is implemented by a guest that reports resource use
// (minor 4). A separate interface so older fakes and guests still satisfy
// Service; an op it lacks answers ErrUnsupported.
type UsageService interface {
	Usage(context.Context, *UsageRequest) (*UsageResponse, error)
}
