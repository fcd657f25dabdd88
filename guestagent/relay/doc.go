// Package relay is the guest's end of the host API bridge: a Unix socket
// in the guest whose connections are relayed to the host over the current
// agent session, each tagged with the caller's identity as the kernel
// reports it (uid, agent, plugin namespace).
package relay
