package provision

// DefaultManifestURL is the built-in image for this machine's
// architecture, or "" when there is none.
func DefaultManifestURL() string { return "" }

// BuiltinManifest returns a manifest compiled into the app for a
// "builtin:" URL, or nil.
func BuiltinManifest(url string) *Manifest { return nil }
