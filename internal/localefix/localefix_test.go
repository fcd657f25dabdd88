package localefix

import "testing"

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // LANGUAGE afterwards, "" for unset
	}{
		{"C.UTF-8", map[string]string{"LANG": "C.UTF-8"}, "en"},
		{"POSIX.utf8 in LC_ALL", map[string]string{"LC_ALL": "POSIX.utf8", "LANG": "de_DE.UTF-8"}, "en"},
		{"plain C parses already", map[string]string{"LANG": "C"}, ""},
		{"a real locale", map[string]string{"LANG": "fr_FR.UTF-8"}, ""},
		{"LC_ALL wins over a C LANG", map[string]string{"LC_ALL": "de_DE.UTF-8", "LANG": "C.UTF-8"}, ""},
		{"LANGUAGE already set", map[string]string{"LANG": "C.UTF-8", "LANGUAGE": "de"}, "de"},
		{"nothing set", map[string]string{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tc.env {
				env[k] = v
			}
			apply(func(k string) (string, bool) { v, ok := env[k]; return v, ok },
				func(k, v string) error { env[k] = v; return nil })
			if got := env["LANGUAGE"]; got != tc.want {
				t.Errorf("LANGUAGE = %q, want %q", got, tc.want)
			}
		})
	}
}
