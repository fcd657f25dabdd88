//go:build unix

package provision

import (
	"os"
	"syscall"
	"testing"
)

func diskUsage(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}
