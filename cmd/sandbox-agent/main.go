//go:build linux

// Command sandbox-agent is the guest agent of the sandbox VM. As the VM's
// PID 1 it boots the guest and serves the host over virtio-serial or
// vsock; "sandbox-agent serve-stdio" serves one session on stdin/stdout
// without touching the machine, for development and tests.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/guestagent"
	"github.com/osaurus/osaurus-sandbox/guestagent/boot"
	"github.com/osaurus/osaurus-sandbox/guestagent/exec"
	"github.com/osaurus/osaurus-sandbox/guestagent/network"
	"github.com/osaurus/osaurus-sandbox/guestagent/search"
	"golang.org/x/sys/unix"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// The kernel may hand init stray command line words; PID 1 ignores
	// them and always boots.
	if os.Getpid() == 1 {
		boot.RunInit(version)
		return
	}
	switch {
	case len(os.Args) == 2 && os.Args[1] == "serve-stdio":
		if err := serveStdio(); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox-agent:", err)
			os.Exit(1)
		}
	case len(os.Args) == 2 && os.Args[1] == "version":
		fmt.Println(version)
	case len(os.Args) >= 2 && os.Args[1] == "search":
		// The text search sandbox_search_files falls back to without
		// ripgrep; it runs as the agent's user like any of its commands.
		os.Exit(search.Run(os.Args[2:], os.Stdout, os.Stderr))
	case len(os.Args) == 2 && os.Args[1] == "netrules":
		// The network policy as the kernel holds it, for support and tests.
		rules, err := network.InstalledRules()
		if err != nil {
			fmt.Fprintln(os.Stderr, "sandbox-agent:", err)
			os.Exit(1)
		}
		for _, r := range rules {
			fmt.Println(r)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: sandbox-agent serve-stdio | version | netrules | search ARGS\n(with no arguments it must run as PID 1 of the sandbox VM)")
		os.Exit(2)
	}
}

// serveStdio serves one session on stdin/stdout. Logs go to stderr; stdout
// carries the protocol.
func serveStdio() error {
	lg := log.New(os.Stderr, "sandbox-agent: ", log.LstdFlags)
	reaper, err := exec.NewReaper()
	if err != nil {
		return err
	}
	defer reaper.Close()
	uptime, _ := guestagent.Uptime()
	svc, err := guestagent.NewService(guestagent.Config{
		AgentVersion: version,
		Reaper:       reaper,
		BootSeconds:  uptime,
		Logger:       lg,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM)
	defer stop()
	err = svc.ServeConn(ctx, stdio{}, guestagent.TransportStdio)
	if errors.Is(err, errdefs.ErrSessionEnded) {
		return nil // the host hung up: the normal end
	}
	return err
}

// stdio is the process's stdin and stdout as one connection.
type stdio struct{}

func (stdio) Read(b []byte) (int, error)  { return os.Stdin.Read(b) }
func (stdio) Write(b []byte) (int, error) { return os.Stdout.Write(b) }
func (stdio) Close() error                { return errors.Join(os.Stdin.Close(), os.Stdout.Close()) }
