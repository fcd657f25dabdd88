package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// capture keeps the start and the end of a stream that may be far larger
// than a model should see, in bounded memory: a model needs both the first
// lines (what ran) and the last ones (how it ended).
type capture struct {
	headChars, tailChars int // characters shown of each end
	head, tail           []byte
	total                int64
}

// newCapture keeps max characters: 40% from the start, 60% from the end.
func newCapture(max int) *capture {
	h := max * 2 / 5
	return &capture{headChars: h, tailChars: max - h}
}

// Bytes kept per end: a character is at most 4 bytes in UTF-8.
func (c *capture) headBytes() int { return 4 * c.headChars }
func (c *capture) tailBytes() int { return 4 * c.tailChars }

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.headBytes() - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailBytes() {
		// Compact now and then so appends stay amortised O(1).
		c.tail = append([]byte(nil), c.tail[len(c.tail)-c.tailBytes():]...)
	}
	return n, nil
}

// Len is how many bytes were written.
func (c *capture) Len() int64 { return c.total }

// Text returns what a model sees and whether anything was left out. A
// marker in the middle says how much.
func (c *capture) Text() (string, bool) {
	var head, tail string
	if int64(len(c.head)+len(c.tail)) == c.total {
		s := string(c.head) + string(c.tail)
		if utf8.RuneCountInString(s) <= c.headChars+c.tailChars {
			return valid(s), false
		}
		head, tail = firstChars(s, c.headChars), lastChars(s, c.tailChars)
	} else {
		// Bytes were dropped between the ends, so each buffer holds at
		// least its share of characters.
		head, tail = firstChars(string(c.head), c.headChars), lastChars(string(c.tail), c.tailChars)
	}
	omitted := c.total - int64(len(head)) - int64(len(tail))
	return valid(head) + fmt.Sprintf("\n\n[... %d bytes omitted of %d ...]\n\n", omitted, c.total) + valid(tail), true
}

// firstChars is the first n characters of s (an invalid byte counts as one).
func firstChars(s string, n int) string {
	i := 0
	for range n {
		if i >= len(s) {
			break
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return s[:i]
}

// lastChars is the last n characters of s, not starting inside a
// character.
func lastChars(s string, n int) string {
	i := len(s)
	for range n {
		if i <= 0 {
			break
		}
		_, w := utf8.DecodeLastRuneInString(s[:i])
		i -= w
	}
	return s[i:]
}

// valid replaces invalid UTF-8 (binary output) so the JSON stays readable.
func valid(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// truncTail keeps the last n characters of s, for error messages.
func truncTail(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	tail := lastChars(s, n)
	// Text is scrubbed before it is cut: keep a [REDACTED:KEY] marker the
	// cut falls in whole, so the reader sees which secret stood there.
	cut := len(s) - len(tail)
	if open := strings.LastIndex(s[:min(len(s), cut+len(redactedMark)-1)], redactedMark); open >= 0 && open < cut && !strings.Contains(s[open:cut], "]") {
		tail = s[open:]
	}
	return "..." + tail
}

// redactedMark starts what secrets.ScrubValues puts in place of a value.
const redactedMark = "[REDACTED:"
