// Package oserr gives the guest agent's system-call errors the agentproto
// sentinel that tells the host what kind of failure each was (not found,
// permission, escape...), keeping the original message.
package oserr
