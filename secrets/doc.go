// Package secrets keeps agents' secrets in the OS keychain (the macOS
// Keychain; the Secret Service on Linux), scoped per agent. Values are
// never written to disk by this app, never logged and never put in an
// envelope; the names of an agent's secrets are kept in the keychain too,
// as an index entry, because keychains can't list by prefix portably.
//
// Scrub replaces an agent's secret values (6+ characters) in text with
// [REDACTED:KEY], including a value cut in two by truncated tool output.
package secrets
