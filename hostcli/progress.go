package hostcli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
)

// progressBar draws provisioning progress on a terminal, or prints a line
// per phase when the output is not one.
type progressBar struct {
	w         io.Writer
	tty       bool
	lastPhase string
	lastState control.State
	drawn     bool
}

func newProgressBar(w io.Writer) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressBar{w: w, tty: tty}
}

func (b *progressBar) update(st control.Status) {
	if st.State != b.lastState {
		b.clear()
		fmt.Fprintf(b.w, "%s...\n", st.State)
		b.lastState = st.State
	}
	p := st.Progress
	if p == nil {
		return
	}
	if p.Phase != b.lastPhase {
		b.clear()
		if !b.tty {
			fmt.Fprintf(b.w, "  %s\n", p.Phase)
		}
		b.lastPhase = p.Phase
	}
	if !b.tty {
		return
	}
	const width = 30
	line := fmt.Sprintf("  %-14s %s", p.Phase, mib(p.Done))
	if p.Total > 0 {
		n := min(int(int64(width)*p.Done/p.Total), width)
		line = fmt.Sprintf("  %-14s [%s%s] %s / %s", p.Phase, strings.Repeat("#", n), strings.Repeat(".", width-n), mib(p.Done), mib(p.Total))
	}
	fmt.Fprintf(b.w, "\r\033[K%s", line)
	b.drawn = true
}

func (b *progressBar) clear() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
		b.drawn = false
	}
}

func (b *progressBar) finish() { b.clear() }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
