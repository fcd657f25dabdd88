// Package errclass holds only tests: it lists the host packages' sentinel
// errors with their errdefs class, checks that the list is complete
// (TestListIsComplete), that each is of its one class, and that the edges
// that translate errors (tool envelopes, the bridge's HTTP statuses) answer
// for each sentinel exactly what they answer for its class. The edges' own
// tests (hostcli's exit codes, tools/envelope, bridge, host/api/client's
// control socket) then test the classes alone (errdefs.Classes). Being
// test files, its imports of every host package draw no arrow in the
// build's import graph.
//
// This one non-test file lets builds of ./... for every platform (the
// darwin check's among them) find a package here.
package errclass
