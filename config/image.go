package config

import "runtime"

// Built-in images: manifests compiled into the app, named by a
// "builtin:<name>" URL in the imageManifest setting. provision resolves
// them; the window only names them.
const (
	BuiltinImagePrefix = "builtin:"
	BuiltinAlpineImage = BuiltinImagePrefix + "alpine"
)

// DefaultImageManifest is the built-in image for this machine's
// architecture (amd64 and arm64 have one), or "" when there is none.
func DefaultImageManifest() string {
	switch runtime.GOARCH {
	case "amd64", "arm64":
		return BuiltinAlpineImage
	}
	return ""
}
