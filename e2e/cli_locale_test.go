//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCLIUnderCLocale: under the C locale with a codeset, the default in
// containers and minimal installs, CLI commands print no toolkit locale
// errors.
func TestCLIUnderCLocale(t *testing.T) {
	bin := buildCLI(t)
	for _, lang := range []string{"C.UTF-8", "C", "POSIX.utf8"} {
		cmd := exec.Command(bin, "--help")
		env := []string{"LANG=" + lang, "HOME=" + t.TempDir()}
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); k != "LANG" && k != "LC_ALL" && k != "LC_MESSAGES" && k != "LANGUAGE" && k != "HOME" {
				env = append(env, kv)
			}
		}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("LANG=%s --help: %v\n%s", lang, err, out)
		}
		if strings.Contains(string(out), "locale") {
			t.Errorf("LANG=%s: output mentions the locale:\n%s", lang, out)
		}
	}
}
