// Package bridge is the host API bridge: the HTTP/1.1 server that lets
// code inside the VM reach host services: secrets, config, the log
// buffer, inference, agent dispatch and tasks, memory, events and plugin
// creation (the routes are listed in Server's handler, server.go).
//
// Transport: in the guest, processes connect to /run/osaurus-bridge.sock.
// The guest agent reads the caller's uid from the kernel (SO_PEERCRED),
// maps it to an agent, and opens an agentproto "bridge" call to the host
// carrying that identity; the call's stream then carries the caller's
// plain HTTP. Server.Handle accepts such calls and feeds their streams to
// a net/http server through an in-memory listener, so the identity is a
// property of the connection: nothing the caller sends can change it.
package bridge
