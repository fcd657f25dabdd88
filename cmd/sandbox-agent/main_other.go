//go:build !linux

// Command sandbox-agent is the guest agent of the sandbox VM; it only runs
// on Linux.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "sandbox-agent runs inside the Linux sandbox VM only")
	os.Exit(2)
}
