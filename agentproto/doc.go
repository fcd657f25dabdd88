// Package agentproto is the versioned wire protocol between the host app and
// the guest agent (cmd/sandbox-agent).
//
// Transport: one byte stream (a virtio-serial port or a vsock connection)
// carries one yamux session. A virtio-serial port lives as long as the VM,
// so there the session is preceded by the host's claim (ClaimStream,
// AcceptClaim in claim.go): a new host supersedes a session an earlier one
// left behind. Either side may open streams, so the guest can
// later call the host (the host API bridge) over the same channel. Every call
// is one stream.
//
// Framing inside a stream: [1 byte type][4 byte big-endian length][payload].
// A call starts with a Request frame ({"op", "body"}) and ends with a
// Response frame ({"body"} or {"error"}). Exec adds frames in between: the
// guest sends a Response carrying the pid as soon as the process started, then
// Stdout/Stderr frames as output arrives and finally an Exit frame; the host
// may send Stdin, StdinEOF and Signal frames at any time. File bodies
// (write_file's content, read_file's result) follow the Request or the
// Response as raw Data frames ended by DataEnd.
//
// The first call on a new session is "hello": the host states its protocol
// version and wall-clock time; the guest answers with its own version and
// facts about itself. A major version mismatch fails the handshake.
package agentproto

// Version is the protocol version. Bump Major on incompatible changes.
const (
	VersionMajor = 2
	VersionMinor = 10 // 2: ExecRequest.Network; 3: net_log, ExecRequest.NetScope; 4: Limits, ExitStatus.Limit, usage; 5: user_limit; 6: net_release, HelloRequest.HostAddrs; 7: UserLimitRequest.TmpMaxBytes, UserUsage.TmpBytes; 8: net.port_dial; 9: ExecRequest.Tty, Resize frames, SignalFrame.Children; 10: HelloRequest.Seed, HelloResponse.Reseeded
)
