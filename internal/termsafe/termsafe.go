// Package termsafe neutralises text an agent wrote (its log lines, events,
// memories, task output, plugin descriptions) before it reaches a terminal
// or the window. A terminal obeys escape sequences: an ESC in a log line
// could move the cursor, rewrite what was printed before, set the window
// title, or on some terminals make it answer with input. Every control
// character except tab and newline is shown as a visible escape instead,
// so the text reads the same and does nothing.
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// String returns s with every control character except tab and newline
// (C0, DEL, C1, and the Unicode controls that reorder text on screen)
// written as a visible escape (\x1b, \r, \u009b, \u202e), and every byte
// that is not UTF-8 as \xNN. Text without any is returned as is.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 && r != '\t' && r != '\n', r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// Line is String for text shown on one line: newlines and tabs are
// escaped too.
func Line(s string) string {
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(String(s))
}

func clean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 || unsafeRune(r) {
			return false
		}
		i += w
	}
	return true
}

// unsafeRune: C1 controls (U+0080–U+009F: U+009B is a CSI to many
// terminals) and the bidirectional controls that make text read other
// than it is stored (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069).
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f, r == 0x061c, r == 0x200e, r == 0x200f,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
