// Package guestagent is the sandbox VM's guest agent service: the
// agentproto.Service the host calls over virtio-serial or vsock (Service,
// ServeConn). It dispatches every operation and itself answers the
// handshake, user add/delete and per-user limits.
//
// Everything a caller asks for runs with the rights of the Linux user the
// request names: processes get that user's credentials, and file operations
// run on a dedicated OS thread whose credentials were switched to the user,
// so the kernel, not the agent, enforces permissions.
//
// The concerns around it live in subpackages: guestagent/boot (the agent
// as PID 1: mounts, modules, root switch, then serving), guestagent/account
// (account files, credential switches, private /tmp), guestagent/network
// (DHCP, netlink, the per-agent network policy and egress proxy),
// guestagent/exec (processes, the reaper, cgroups), guestagent/files (file
// operations), guestagent/relay (the host API bridge socket),
// guestagent/search (`sandbox-agent search`, the fallback text search) and
// guestagent/oserr (system errors to wire codes). Their pure logic is
// tested without root; this package's tests need root.
package guestagent
