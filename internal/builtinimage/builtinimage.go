// Package builtinimage names the built-in images: manifests compiled into
// the app, named by a "builtin:<name>" URL in the imageManifest setting.
// provision resolves them; the window only names them, so it links this
// and no provisioning code.
package builtinimage

import "runtime"

const (
	// Prefix starts every built-in image's URL.
	Prefix = "builtin:"
	// Alpine is the built-in Alpine Linux image.
	Alpine = Prefix + "alpine"
)

// Default is the built-in image for this machine's architecture (amd64
// and arm64 have one), or "" when there is none.
func Default() string {
	switch runtime.GOARCH {
	case "amd64", "arm64":
		return Alpine
	}
	return ""
}
