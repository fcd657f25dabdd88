// Package guestagent is the sandbox VM's guest agent: it boots the VM as
// PID 1 (mounts, kernel modules, root switch, network) and serves the
// agentproto.Service to the host over virtio-serial or vsock.
//
// Everything a caller asks for runs with the rights of the Linux user the
// request names: processes get that user's credentials, and file operations
// run on a dedicated OS thread whose credentials were switched to the user,
// so the kernel, not the agent, enforces permissions.
//
// Only the account-file parser is portable; the rest is Linux-only.
package guestagent
