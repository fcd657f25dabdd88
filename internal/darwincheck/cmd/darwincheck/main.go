// Command darwincheck type-checks the project's darwin files on any host:
// see package internal/darwincheck. Run it from the module root:
//
//	go run ./internal/darwincheck/cmd/darwincheck [packages]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/internal/darwincheck"
)

func main() {
	dir := flag.String("C", ".", "module root")
	verbose := flag.Bool("v", false, "list the packages checked and built")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	start := time.Now()
	rep, err := darwincheck.Run(ctx, darwincheck.Config{Dir: *dir, Patterns: flag.Args()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "darwincheck:", err)
		os.Exit(1)
	}
	fmt.Printf("darwincheck: %s/%s: type-checked %d packages (%d files) against stubs of %s; built %d cgo-free packages; %d need cgo (%.1fs)\n",
		darwincheck.GOOS, darwincheck.GOARCH, len(rep.Checked), rep.Files, strings.Join(rep.Stubbed, ", "),
		len(rep.Built), len(rep.NeedCgo), time.Since(start).Seconds())
	if *verbose {
		for _, l := range []struct {
			name string
			pkgs []string
		}{{"type-checked", rep.Checked}, {"built", rep.Built}, {"need cgo", rep.NeedCgo}} {
			fmt.Printf("%s:\n\t%s\n", l.name, strings.Join(l.pkgs, "\n\t"))
		}
	}
}
