// Package exec is the guest agent's process side: Exec and background
// processes run with the credentials, network namespace and cgroup of the
// user a request names, the reaper that collects every child of PID 1, and
// the per-user cgroups and their usage.
//
// The request checks (environment, working directory, PATH lookup) are
// plain functions tested without root; starting processes needs root.
package exec
