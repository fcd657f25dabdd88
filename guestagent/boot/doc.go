// Package boot is the guest agent as the VM's PID 1 (RunInit): it mounts
// the root file system and switches to it, loads kernel modules, hardens
// the kernel, sets up cgroups, networking and the network policy, keeps
// package scripts from starting services, and then serves the host with
// guestagent.Service over virtio-serial or vsock.
//
// Module-list and signal tests need no root; tests that write root-owned
// files fail saying so when not run as root.
package boot
