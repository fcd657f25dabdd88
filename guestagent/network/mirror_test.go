package network

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestPackageMirrorHosts(t *testing.T) {
	root := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := PackageMirrorHosts(root); !errors.Is(err, errNoMirror) {
		t.Fatalf("no sources: %v", err)
	}
	write("etc/apt/sources.list", "# comment http://commented.example/\ndeb http://Mirror.Example.org/debian bookworm main\n"+
		"deb [arch=amd64 signed-by=/k.gpg] https://secure.example.net/debian bookworm main\ndeb file:/srv/local ./\n")
	write("etc/apt/sources.list.d/x.sources", "Types: deb\nURIs: http://a.example.com/d http://b.example.com/d\nSuites: bookworm\n")
	write("etc/apt/sources.list.d/y.list", "deb-src http://mirror.example.org/debian bookworm main\n")
	write("etc/apk/repositories", "https://apk.example.com/v3.24/main\n@edge http://edge.example.com/edge/main\n/media/cdrom/apks\n")
	got, err := PackageMirrorHosts(root)
	want := []string{"a.example.com", "apk.example.com", "b.example.com", "edge.example.com", "mirror.example.org", "secure.example.net"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
}
