package secrets

import "testing"

// TestService is the keychain service name in test binaries: a test can
// never read, overwrite or delete the product's real entries, even on a
// desktop whose keyring answers. It is chosen by the binary being a test
// binary, not by anything a user or an agent sets, so nothing can point
// the real app at other entries.
const TestService = "osaurus-sandbox-test"

// testBuild is set, at link time only, in the app binaries tests build
// and run as children (-ldflags "-X ...secrets.testBuild=1"), so they and
// the test that runs them share TestService. Nothing at run time can set
// it.
var testBuild string

// TestBuildLDFlag is the go build flag tests use for such binaries.
const TestBuildLDFlag = "-X github.com/osaurus/osaurus-sandbox/secrets.testBuild=1"

// ServiceName is the keychain service every entry is stored under:
// Service, or TestService in a test binary or a binary a test built.
func ServiceName() string {
	if testing.Testing() || testBuild == "1" {
		return TestService
	}
	return Service
}
