// Package secrets keeps agents' secrets in the OS keychain (the macOS
// Keychain; the Secret Service on Linux), scoped per agent, or, when the
// data folder's secretStore setting says "file", in one file only the
// user can read (File, for servers without a keychain); ForDataDir picks.
// With the keychain, values are never written to disk by this app; they
// are never logged and never put in an envelope. The names of an agent's
// secrets are kept in the store too, as an index entry, because
// keychains can't list by prefix portably.
//
// Scrub replaces an agent's secret values (6+ characters) in text with
// [REDACTED:KEY], including a value cut in two by truncated tool output.
package secrets
