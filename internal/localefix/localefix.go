// Package localefix gives the UI toolkit a locale it can parse when the
// process runs under the C locale with a codeset ("C.UTF-8", "POSIX.utf8"),
// the default in containers and minimal Debian installs. The toolkit's
// locale reader turns those into the language "C", which is not a valid
// language tag, and logs an error on every start, CLI commands included.
//
// The fix is a valid fallback, not a silenced log: for a C locale the
// process's language is English, so LANGUAGE (the GNU list of message
// languages, which gettext itself ignores under the C locale, so child
// processes are unaffected) is set to "en" when unset.
//
// Import it for its side effect from package main. It has no imports
// outside the standard library, so Go initialises it before the toolkit's
// language package, whose dependencies sort after it.
package localefix

import (
	"os"
	"strings"
)

func init() { apply(os.LookupEnv, os.Setenv) }

// apply sets LANGUAGE=en when the effective message locale is C or POSIX
// with a codeset and LANGUAGE is unset.
func apply(lookup func(string) (string, bool), set func(string, string) error) {
	if v, ok := lookup("LANGUAGE"); ok && v != "" {
		return
	}
	for _, name := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		v, ok := lookup(name)
		if !ok || v == "" {
			continue
		}
		lang, _, hasCodeset := strings.Cut(v, ".")
		if hasCodeset && (lang == "C" || lang == "POSIX") {
			_ = set("LANGUAGE", "en")
		}
		return // the first one set decides, as in setlocale(3)
	}
}
