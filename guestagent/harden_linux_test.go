package guestagent

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mdlayher/vsock"
)

func TestHardenKernel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		present  []string // sysctl files that exist
		noUserNS bool     // a kernel built without user namespaces
		wantErr  string
		want     map[string]string
	}{
		{
			name: "debian kernel",
			present: []string{"fs/protected_regular", "fs/protected_fifos", "fs/protected_symlinks", "fs/protected_hardlinks",
				"kernel/kptr_restrict", "kernel/dmesg_restrict", "kernel/yama/ptrace_scope",
				"kernel/unprivileged_userns_clone", "user/max_user_namespaces"},
			want: map[string]string{"fs/protected_regular": "2", "fs/protected_fifos": "2", "kernel/kptr_restrict": "2",
				"kernel/yama/ptrace_scope": "1", "kernel/unprivileged_userns_clone": "0", "user/max_user_namespaces": "9"},
		},
		{
			name: "no yama, no debian knob",
			present: []string{"fs/protected_regular", "fs/protected_fifos", "fs/protected_symlinks", "fs/protected_hardlinks",
				"kernel/kptr_restrict", "kernel/dmesg_restrict", "user/max_user_namespaces"},
			want: map[string]string{"fs/protected_regular": "2", "user/max_user_namespaces": "0"},
		},
		{
			name: "our kernel: no user namespaces to turn off",
			present: []string{"fs/protected_regular", "fs/protected_fifos", "fs/protected_symlinks", "fs/protected_hardlinks",
				"kernel/kptr_restrict", "kernel/dmesg_restrict", "kernel/yama/ptrace_scope"},
			noUserNS: true,
			want:     map[string]string{"fs/protected_regular": "2", "kernel/yama/ptrace_scope": "1"},
		},
		{
			name: "user namespaces without a knob to turn them off",
			present: []string{"fs/protected_regular", "fs/protected_fifos", "fs/protected_symlinks", "fs/protected_hardlinks",
				"kernel/kptr_restrict", "kernel/dmesg_restrict"},
			wantErr: "user namespaces",
		},
		{
			name:    "a required setting missing",
			present: []string{"fs/protected_fifos", "user/max_user_namespaces"},
			wantErr: "fs/protected_regular",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, p := range tc.present {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
				if err := os.WriteFile(filepath.Join(dir, p), []byte("9"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			defer func(f func() bool) { userNamespaces = f }(userNamespaces)
			userNamespaces = func() bool { return !tc.noUserNS }
			err := HardenKernel(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if b, _ := os.ReadFile(filepath.Join(dir, k)); string(b) != v {
					t.Errorf("%s = %q, want %q", k, b, v)
				}
			}
		})
	}
}

func TestFromHost(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&vsock.Addr{ContextID: vsock.Host, Port: 1234}, true},
		{&vsock.Addr{ContextID: 3, Port: 1234}, false},        // another VM
		{&vsock.Addr{ContextID: vsock.Local, Port: 1}, false}, // this guest itself
		{&net.UnixAddr{Name: "x"}, false},
	} {
		if got := fromHost(tc.addr); got != tc.want {
			t.Errorf("fromHost(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}
