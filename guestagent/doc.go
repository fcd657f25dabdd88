// Package guestagent is the sandbox VM's guest agent service: the
// agentproto.Service the host calls over virtio-serial or vsock (Service,
// ServeConn), with exec and background processes, file operations,
// cgroups and per-user limits, user add/delete, the host API bridge relay
// and the process reaper.
//
// Everything a caller asks for runs with the rights of the Linux user the
// request names: processes get that user's credentials, and file operations
// run on a dedicated OS thread whose credentials were switched to the user,
// so the kernel, not the agent, enforces permissions.
//
// The concerns around it live in subpackages: guestagent/boot (the agent
// as PID 1: mounts, modules, root switch, then serving), guestagent/account
// (account files, credential switches, private /tmp) and guestagent/network
// (DHCP, netlink, the per-agent network policy and egress proxy). Their
// pure logic is tested without root; this package's tests need root.
package guestagent
