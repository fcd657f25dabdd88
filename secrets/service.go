package secrets

import "testing"

// TestService is the keychain service name in test binaries: a test can
// never read, overwrite or delete the product's real entries, even on a
// desktop whose keyring answers. It is chosen by the binary being a test
// binary, not by anything a user or an agent sets, so nothing can point
// the real app at other entries.
const TestService = "osaurus-sandbox-test"

// ServiceName is the keychain service every entry is stored under:
// Service, or TestService in a test binary.
func ServiceName() string {
	if testing.Testing() {
		return TestService
	}
	return Service
}
