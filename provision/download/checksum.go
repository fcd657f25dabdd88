package download

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// ErrNoChecksum: a checksum file has no usable SHA-256 entry for a file.
var ErrNoChecksum = errdefs.Class(errdefs.ErrUpstream, "no SHA-256 entry in checksum file")

// maxChecksumFile bounds what is read; real ones are a few KiB.
const maxChecksumFile = 4 << 20

// FetchChecksumFile downloads a publisher's checksum file (http(s) or
// file URL) and returns the SHA-256 it lists for fileName. It reads
// sha256sum output ("HEX  name", "HEX *name") and BSD/Fedora style
// ("SHA256 (name) = HEX"), skipping comments, other algorithms and PGP
// armour; the signature itself is not checked.
//
// A bare digest on its own line (per-file ".sha256" files) is accepted
// when the file holds nothing else.
func FetchChecksumFile(ctx context.Context, c *Client, checksumURL, fileName string) (string, error) {
	src, err := c.open(ctx, checksumURL, 0)
	if err != nil {
		return "", fmt.Errorf("checksum file: %w", err)
	}
	defer src.Close()
	data, err := io.ReadAll(io.LimitReader(src, maxChecksumFile+1))
	if err != nil {
		if cause := src.cause(); cause != nil {
			err = cause
		}
		return "", fmt.Errorf("checksum file %s: %w", checksumURL, err)
	}
	if len(data) > maxChecksumFile {
		return "", fmt.Errorf("checksum file %s: larger than %d bytes", checksumURL, maxChecksumFile)
	}
	sum, err := parseChecksumFile(string(data), fileName)
	if err != nil {
		return "", fmt.Errorf("checksum file %s: %w", checksumURL, err)
	}
	return sum, nil
}

// parseChecksumFile finds fileName's SHA-256 in a checksum listing. An
// entry naming exactly fileName wins; otherwise one whose last path
// element is fileName. Entries for one name that disagree are an error.
func parseChecksumFile(data, fileName string) (string, error) {
	want := strings.TrimPrefix(fileName, "./")
	var exact, byBase, bare []string
	named := false
	for line := range strings.Lines(data) {
		sum, name, ok := parseChecksumLine(strings.TrimRight(line, "\r\n"))
		if !ok {
			continue
		}
		if name == "" {
			bare = append(bare, sum)
			continue
		}
		named = true
		name = strings.TrimPrefix(name, "./")
		switch {
		case name == want:
			exact = append(exact, sum)
		case path.Base(name) == want:
			byBase = append(byBase, sum)
		}
	}
	for _, sums := range [][]string{exact, byBase} {
		if len(sums) == 0 {
			continue
		}
		for _, s := range sums[1:] {
			if s != sums[0] {
				return "", fmt.Errorf("conflicting SHA-256 entries for %q: %s and %s", fileName, sums[0], s)
			}
		}
		return sums[0], nil
	}
	if !named && len(bare) == 1 {
		return bare[0], nil
	}
	return "", fmt.Errorf("%w for %q", ErrNoChecksum, fileName)
}

// parseChecksumLine returns the SHA-256 and file name of one line; name
// is empty for a bare digest. ok is false for anything else.
func parseChecksumLine(line string) (sum, name string, ok bool) {
	line = strings.TrimLeft(line, " \t")
	if rest, found := strings.CutPrefix(line, "SHA256 ("); found {
		i := strings.LastIndex(rest, ") = ")
		if i < 0 {
			return "", "", false
		}
		sum, err := normalizeDigest(rest[i+len(") = "):], false)
		return sum, rest[:i], err == nil && rest[:i] != ""
	}
	// sha256sum starts a line with '\' when it escaped the name.
	escaped := strings.HasPrefix(line, `\`)
	if escaped {
		line = line[1:]
	}
	if len(line) < 64 || !isHex64(line[:64]) {
		return "", "", false
	}
	sum, rest := strings.ToLower(line[:64]), line[64:]
	if strings.TrimSpace(rest) == "" {
		return sum, "", true
	}
	if rest[0] != ' ' && rest[0] != '\t' {
		return "", "", false // a longer digest (SHA-512), not ours
	}
	rest = rest[1:]
	if rest != "" && (rest[0] == ' ' || rest[0] == '*') {
		rest = rest[1:] // text/binary mode flag
	}
	if escaped {
		rest = unescapeName(rest)
	}
	return sum, rest, rest != ""
}

func unescapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
