package runner

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
)

// Text renders a task for people: its steps, tool calls with their
// results, and how it ended. What the agent and the model wrote is
// neutralised for a terminal (termsafe).
func (t Task) Text() string {
	return termsafe.String(t.text())
}

func (t Task) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "task %s  %s  agent %s  from %s  %s\n%s\n", t.ID, t.State, t.Agent, t.Source, t.Created.Local().Format("2006-01-02 15:04:05"), t.Task)
	for _, s := range t.Steps {
		fmt.Fprintf(&b, "\nstep %d", s.N)
		if s.Content != "" {
			fmt.Fprintf(&b, ": %s", OneLine(s.Content, 300))
		}
		b.WriteString("\n")
		for _, c := range s.ToolCalls {
			fmt.Fprintf(&b, "  %s %s\n", c.Name, OneLine(c.Arguments, 300))
			switch {
			case !c.Done:
				b.WriteString("    running…\n")
			case c.OK:
				fmt.Fprintf(&b, "    ok: %s\n", OneLine(c.Result, 500))
			default:
				fmt.Fprintf(&b, "    error: %s\n", OneLine(c.Result, 500))
			}
		}
	}
	switch t.State {
	case Done:
		fmt.Fprintf(&b, "\nanswer: %s\n", t.Answer)
	case Running:
	default:
		fmt.Fprintf(&b, "\n%s: %s\n", t.State, t.Error)
	}
	return b.String()
}

// OneLine shortens s to one line of at most n characters.
func OneLine(s string, n int) string {
	s = termsafe.Line(strings.Join(strings.Fields(s), " "))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
