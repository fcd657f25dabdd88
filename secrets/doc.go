// Package secrets will keep agents' and plugins' secrets in the OS keychain
// (github.com/zalando/go-keyring), scoped per agent. Not built yet.
package secrets
