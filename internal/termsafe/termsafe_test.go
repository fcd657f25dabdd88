package termsafe

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text\twith tab\nand newline", "plain text\twith tab\nand newline"},
		{"héllo wörld ✓", "héllo wörld ✓"},
		{"\x1b[2J\x1b]0;pwned\x07title", `\x1b[2J\x1b]0;pwned\x07title`},
		{"over\rwrite", `over\rwrite`},
		{"bs\b del\x7f nul\x00", `bs\x08 del\x7f nul\x00`},
		{"c1 \u009b31m csi", `c1 \u009b31m csi`},
		{"bidi \u202eevil\u202c", `bidi \u202eevil\u202c`},
		{"raw \x9b byte", `raw \x9b byte`},
	} {
		got := String(tc.in)
		if got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, c := range got {
			if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f || c >= 0x80 && c <= 0x9f || unsafeRune(c) {
				t.Errorf("String(%q) keeps control %U", tc.in, c)
			}
		}
	}
	if got := Line("a\nb\tc\x1b"); got != `a\nb\tc\x1b` || strings.ContainsAny(got, "\n\t\x1b") {
		t.Errorf("Line = %q", got)
	}
}

func FuzzString(f *testing.F) {
	f.Add("\x1b[31mred\x1b[0m\r\n")
	f.Add("\xc2\x9b\u202e")
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range String(s) {
			if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f || unsafeRune(c) || c == 0xfffd && !strings.ContainsRune(s, 0xfffd) {
				t.Fatalf("String(%q) keeps %U", s, c)
			}
		}
	})
}
